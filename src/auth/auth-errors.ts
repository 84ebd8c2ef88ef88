/** The errors authentication answers with. None ever contains the token. */
import { type RegistryError, refusal, unauthenticated } from "../domain/errors.js";

export { unauthenticated } from "../domain/errors.js";

/**
 * 503: the issuer (its JWKS or introspection endpoint) could not be asked. The
 * cause is kept for the log with the token scrubbed from its message.
 */
export function issuerUnavailable(cause: unknown, token: string): RegistryError {
  const message = "The token issuer could not be reached to check the bearer token; try again later.";
  // By design: the verifier asks the issuer at most once per cooldown, and answers 503 meanwhile.
  return stackless(refusal(message, scrub(cause, token)));
}

/**
 * 503: too many opaque tokens not yet cached are being introspected; the issuer is spared
 * (AUTH_INTROSPECTION_MAX_PER_SECOND).
 */
export function tooManyIntrospections(): RegistryError {
  // Not the issuer's failure: nothing to log but the refusal itself.
  return stackless(refusal("Too many unknown opaque tokens are being checked at the moment; try again shortly."));
}

/**
 * `error` without its stack trace: a refusal is counted by its message (failures.ts), where it
 * was thrown says nothing its message does not.
 */
function stackless<E extends Error>(error: E): E {
  delete error.stack;
  return error;
}

/** A copy of an error with only its name, code and message, the token replaced; no payloads or responses. */
export function scrub(error: unknown, token: string): Error {
  const text = (value: string): string => (token === "" ? value : value.split(token).join("[token]"));
  if (!(error instanceof Error)) return new Error(text(String(error)));
  // The copy's own stack would point here, and the original's is not kept: none.
  const copy = stackless(new Error(text(error.message)));
  copy.name = error.name;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string") Object.assign(copy, { code });
  return copy;
}

/**
 * Authentication could not be set up at start-up (discovery failed, the issuer's metadata lacks an endpoint,
 * the local key is unusable).
 */
export class AuthSetupError extends Error {
  override readonly name = "AuthSetupError";
  constructor(
    readonly code: "AUTH_DISCOVERY_FAILED" | "AUTH_ISSUER_METADATA" | "AUTH_LOCAL_KEY",
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * The time checks beyond exp/nbf, the same for verified JWTs and introspection
 * answers (`now` in seconds): an `iat` past the clock skew is refused, and so
 * is a lifetime (exp - iat) over `maxLifetime`; without `iat` the lifetime
 * counts from now, so a token cannot dodge the bound by leaving `iat` out.
 */
export function checkIssuedAtAndLifetime(
  claims: { readonly exp?: unknown; readonly iat?: unknown },
  now: number,
  skew: number,
  maxLifetime: number,
): void {
  const iat = typeof claims.iat === "number" ? claims.iat : undefined;
  if (iat !== undefined && iat > now + skew)
    throw unauthenticated("The bearer token was issued in the future (its iat is past the clock skew).");
  if (typeof claims.exp === "number" && claims.exp - (iat ?? now) > maxLifetime) {
    throw unauthenticated(
      `The bearer token's lifetime (exp - iat) is longer than this service accepts (${maxLifetime} s).`,
    );
  }
}
