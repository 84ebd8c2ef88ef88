/**
 * Verifies JWT access tokens (RFC 9068) with jose: signature against the
 * issuer's keys, an explicit list of allowed algorithms, issuer, audience,
 * expiry and not-before with a small clock tolerance; then that it is an
 * access token (`typ: at+jwt`, never an ID token), not issued in the future,
 * and not longer-lived than allowed. Each failure becomes a 401 that says what
 * is wrong without repeating the token; an issuer whose keys cannot be had, a 503.
 */
import {
  createLocalJWKSet,
  decodeProtectedHeader,
  errors,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
} from "jose";
import { DEFAULT_MAX_TOKEN_LIFETIME_SECONDS } from "./auth-config.js";
import { checkIssuedAtAndLifetime, issuerUnavailable, unauthenticated } from "./auth-errors.js";

export interface JwtVerifierOptions {
  /** The exact `iss` a token must carry (the issuer's metadata `issuer`). */
  readonly issuer: string;
  /** The `aud` a token must name. */
  readonly audience: string;
  /** Allowed JWS algorithms; asymmetric only (auth-config refuses `none` and HMAC). */
  readonly algorithms: readonly string[];
  /** Tolerance for `exp`, `nbf` and `iat`, in seconds. */
  readonly clockSkewSeconds: number;
  /** Whether the header must say `typ: at+jwt` (RFC 9068); default true. See AuthConfig.requireAccessTokenTyp. */
  readonly requireAccessTokenTyp?: boolean;
  /** The longest lifetime accepted (`exp` - `iat`, or `exp` - now without `iat`), in seconds; default 24 h. */
  readonly maxTokenLifetimeSeconds?: number;
  /** The issuer's public keys: `remoteKeys(jwks_uri)` or jose `createLocalJWKSet`. */
  readonly keys: JWTVerifyGetKey;
  /**
   * The clock for `exp`/`nbf`, in milliseconds since the epoch; default
   * jose's (the system clock). The authenticator passes the one its token
   * cache uses, so both agree on when a token has expired.
   */
  readonly now?: () => number;
}

export interface JwtVerifier {
  /** The verified claims; throws a RegistryError (401, or 503 when the keys cannot be fetched). */
  verify(token: string): Promise<JWTPayload>;
}

/** How the issuer's JWKS is fetched and cached. */
export interface RemoteKeysOptions {
  readonly fetch?: typeof fetch;
  /**
   * The least time between two requests to the JWKS endpoint, in ms, whatever
   * asks for them (an unknown `kid`, keys past their age, a failed request).
   * Default 10 s. Within it, a token needing fresh keys is refused at once:
   * 401 when the last request succeeded (its kid is not published), 503 when
   * it failed (the issuer is unreachable; the failure is not repeated).
   */
  readonly cooldownMs?: number;
  /** How long fetched keys are used before they are fetched again. Default 10 min. */
  readonly cacheMaxAgeMs?: number;
  /** How long one JWKS request may take. Default 5 s. */
  readonly timeoutMs?: number;
  /** The clock, in ms since the epoch; default Date.now. For tests. */
  readonly now?: () => number;
}

/**
 * The issuer's key set could not be fetched or read; the verifier answers 503. Its message names the reason,
 * never a token.
 */
export class JwksUnavailableError extends Error {
  override readonly name = "JwksUnavailableError";
  readonly code = "ERR_JWKS_UNAVAILABLE";
}

/**
 * The issuer's published keys, cached for `cacheMaxAgeMs` and refetched when a
 * token names an unknown `kid`. At most one request per `cooldownMs` goes to
 * the JWKS endpoint, failed ones included: jose's own remote set retries on
 * every unknown kid while the endpoint fails (it only rests after a success),
 * so a stream of tokens with random kids became a stream of requests to a
 * failing issuer. Requests in flight are shared.
 */
export function remoteKeys(jwksUri: URL, options: RemoteKeysOptions = {}): JWTVerifyGetKey {
  const fetchImpl = options.fetch ?? fetch;
  const cooldownMs = options.cooldownMs ?? 10_000;
  const cacheMaxAgeMs = options.cacheMaxAgeMs ?? 600_000;
  const timeoutMs = options.timeoutMs ?? 5_000;
  const now = options.now ?? Date.now;
  let local: JWTVerifyGetKey | undefined;
  let fetchedAt = Number.NEGATIVE_INFINITY;
  let attemptedAt = Number.NEGATIVE_INFINITY;
  let failure: JwksUnavailableError | undefined;
  let pending: Promise<void> | undefined;

  /**
   * Fetches the keys unless the cooldown forbids it; true when fresh keys arrived, false when it was not
   * allowed. Throws when the fetch failed.
   */
  const refresh = async (): Promise<boolean> => {
    if (pending === undefined) {
      if (now() - attemptedAt < cooldownMs) return false;
      attemptedAt = now();
      pending = fetchKeySet(jwksUri, fetchImpl, timeoutMs).then(
        (keys) => {
          local = keys;
          fetchedAt = now();
          failure = undefined;
        },
        (error: unknown) => {
          failure =
            error instanceof JwksUnavailableError
              ? error
              : new JwksUnavailableError(`The issuer's key set at ${jwksUri.href} could not be read.`);
          throw failure;
        },
      );
      const settled = (): void => {
        pending = undefined;
      };
      pending.then(settled, settled);
    }
    await pending;
    return true;
  };

  return async (header, token) => {
    if (local === undefined || now() >= fetchedAt + cacheMaxAgeMs) {
      // No usable keys: without a fetch allowed, the last failure stands (never a stale key past its age).
      if (!(await refresh()))
        throw failure ?? new JwksUnavailableError(`The issuer's key set at ${jwksUri.href} has not been fetched yet.`);
    }
    try {
      return await (local as JWTVerifyGetKey)(header, token);
    } catch (error: unknown) {
      if (!(error instanceof errors.JWKSNoMatchingKey)) throw error;
      if (await refresh()) return (local as JWTVerifyGetKey)(header, token);
      // Within the cooldown: after a failure the kid may be a new key the issuer could not tell us about.
      if (failure !== undefined) throw failure;
      throw error;
    }
  };
}

/** GETs the key set at `jwksUri` (no redirect, at most `timeoutMs`); a JwksUnavailableError says why it failed. */
async function fetchKeySet(jwksUri: URL, fetchImpl: typeof fetch, timeoutMs: number): Promise<JWTVerifyGetKey> {
  let response: Response;
  try {
    response = await fetchImpl(jwksUri.href, {
      method: "GET",
      redirect: "manual",
      headers: { accept: "application/json, application/jwk-set+json" },
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error: unknown) {
    throw new JwksUnavailableError(
      `The issuer's key set at ${jwksUri.href} could not be fetched: ` +
        `${error instanceof Error ? error.message : String(error)}`,
    );
  }
  if (response.status !== 200) {
    await response.body?.cancel();
    throw new JwksUnavailableError(
      `The issuer's key set at ${jwksUri.href} answered HTTP ${response.status}, not 200.`,
    );
  }
  try {
    return createLocalJWKSet((await response.json()) as JSONWebKeySet);
  } catch {
    throw new JwksUnavailableError(`The issuer's key set at ${jwksUri.href} is not a JSON Web Key Set.`);
  }
}

/** Whether the token has the form of a JWS compact serialization (three parts, a JSON header with `alg`). */
export function looksLikeJwt(token: string): boolean {
  if (token.split(".").length !== 3) return false;
  try {
    return typeof decodeProtectedHeader(token).alg === "string";
  } catch {
    return false;
  }
}

/**
 * The `typ` values of an access token once normalized (lower case, no `application/`): RFC 9068's, and the
 * generic one some issuers use.
 */
const ACCESS_TOKEN_TYPES = new Set(["at+jwt", "jwt"]);
/**
 * Claims only an ID token carries (OpenID Connect Core §2, §3.3.2.11): one of them marks a token as not an
 * access token.
 */
const ID_TOKEN_CLAIMS = ["nonce", "at_hash", "c_hash", "s_hash"];

export function createJwtVerifier(options: JwtVerifierOptions): JwtVerifier {
  const requireTyp = options.requireAccessTokenTyp ?? true;
  const maxLifetime = options.maxTokenLifetimeSeconds ?? DEFAULT_MAX_TOKEN_LIFETIME_SECONDS;
  const skew = options.clockSkewSeconds;
  const verifyOptions = {
    issuer: options.issuer,
    audience: options.audience,
    algorithms: [...options.algorithms],
    clockTolerance: skew,
    requiredClaims: ["exp"],
    // jose compares it case-insensitively and with or without "application/" (RFC 9068 §4).
    ...(requireTyp ? { typ: "at+jwt" } : {}),
  };
  const now = options.now ?? Date.now;
  return {
    async verify(token) {
      let verified: Awaited<ReturnType<typeof jwtVerify>>;
      const ms = now();
      try {
        verified = await jwtVerify(token, options.keys, { ...verifyOptions, currentDate: new Date(ms) });
      } catch (error: unknown) {
        throw describeFailure(error, token);
      }
      const { payload, protectedHeader } = verified;
      if (!requireTyp) {
        const typ =
          typeof protectedHeader.typ === "string"
            ? protectedHeader.typ.toLowerCase().replace(/^application\//, "")
            : undefined;
        if (
          (typ !== undefined && !ACCESS_TOKEN_TYPES.has(typ)) ||
          ID_TOKEN_CLAIMS.some((claim) => payload[claim] !== undefined)
        )
          throw notAnAccessToken();
      }
      // jose required exp.
      checkIssuedAtAndLifetime(payload, Math.floor(ms / 1000), skew, maxLifetime);
      return payload;
    },
  };
}

function notAnAccessToken(): Error {
  return unauthenticated(
    "The bearer token is not an access token (RFC 9068 typ at+jwt); an ID token is never accepted as one.",
  );
}

/** Turns a jose failure into the registry's error; never includes the token or its claims. */
function describeFailure(error: unknown, token: string): Error {
  if (error instanceof errors.JWTExpired) return unauthenticated("The bearer token has expired.");
  if (error instanceof errors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case "nbf":
        return unauthenticated("The bearer token is not valid yet (its nbf is in the future).");
      case "iss":
        return unauthenticated("The bearer token was not issued by the issuer this service trusts.");
      case "aud":
        return unauthenticated("The bearer token is not meant for this service (wrong audience).");
      case "exp":
        return unauthenticated("The bearer token has no valid expiry (exp).");
      case "typ":
        return notAnAccessToken();
      default:
        return unauthenticated(`The bearer token's "${error.claim}" claim is not valid.`);
    }
  }
  if (error instanceof errors.JOSEAlgNotAllowed)
    return unauthenticated("The bearer token is signed with an algorithm this service does not accept.");
  if (error instanceof errors.JWSSignatureVerificationFailed)
    return unauthenticated("The bearer token's signature is not valid.");
  if (error instanceof errors.JWKSNoMatchingKey)
    return unauthenticated("The bearer token is signed with a key the issuer has not published.");
  if (error instanceof errors.JWKSMultipleMatchingKeys)
    return unauthenticated("The bearer token does not name its signing key (kid), and the issuer publishes several.");
  if (
    error instanceof errors.JWSInvalid ||
    error instanceof errors.JWTInvalid ||
    error instanceof errors.JOSENotSupported ||
    error instanceof errors.JWKInvalid
  ) {
    return unauthenticated("The bearer token is not a valid JWT.");
  }
  // The issuer's keys could not be fetched or read (timeout, network, non-200, not a JWKS).
  return issuerUnavailable(error, token);
}
