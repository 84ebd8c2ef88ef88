/**
 * Verifies JWT access tokens (RFC 9068) with jose: signature against the
 * issuer's keys, an explicit list of allowed algorithms, issuer, audience,
 * expiry and not-before with a small clock tolerance. Each failure becomes a
 * 401 that says what is wrong without repeating the token.
 */
import { createRemoteJWKSet, customFetch, decodeProtectedHeader, errors, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from "jose";
import { issuerUnavailable, unauthenticated } from "./auth-errors.js";

export interface JwtVerifierOptions {
  /** The exact `iss` a token must carry (the issuer's metadata `issuer`). */
  readonly issuer: string;
  /** The `aud` a token must name. */
  readonly audience: string;
  /** Allowed JWS algorithms; asymmetric only (auth-config refuses `none` and HMAC). */
  readonly algorithms: readonly string[];
  /** Tolerance for `exp` and `nbf`, in seconds. */
  readonly clockSkewSeconds: number;
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
  /** After a fetch, how long an unknown `kid` waits before it may trigger another fetch. Default 10 s. */
  readonly cooldownMs?: number;
  /** How long fetched keys are used before they are fetched again. Default 10 min. */
  readonly cacheMaxAgeMs?: number;
  /** How long one JWKS request may take. Default 5 s. */
  readonly timeoutMs?: number;
}

/** The issuer's published keys, cached and refetched when a token names an unknown `kid`. */
export function remoteKeys(jwksUri: URL, options: RemoteKeysOptions = {}): JWTVerifyGetKey {
  const fetchImpl = options.fetch;
  return createRemoteJWKSet(jwksUri, {
    cooldownDuration: options.cooldownMs ?? 10_000,
    cacheMaxAge: options.cacheMaxAgeMs ?? 600_000,
    timeoutDuration: options.timeoutMs ?? 5_000,
    ...(fetchImpl === undefined ? {} : { [customFetch]: (url: string, init: RequestInit) => fetchImpl(url, init) }),
  });
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

export function createJwtVerifier(options: JwtVerifierOptions): JwtVerifier {
  const verifyOptions = {
    issuer: options.issuer,
    audience: options.audience,
    algorithms: [...options.algorithms],
    clockTolerance: options.clockSkewSeconds,
    requiredClaims: ["exp"],
  };
  const now = options.now;
  return {
    async verify(token) {
      try {
        const { payload } = await jwtVerify(token, options.keys, now === undefined ? verifyOptions : { ...verifyOptions, currentDate: new Date(now()) });
        return payload;
      } catch (error: unknown) {
        throw describeFailure(error, token);
      }
    },
  };
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
      default:
        return unauthenticated(`The bearer token's "${error.claim}" claim is not valid.`);
    }
  }
  if (error instanceof errors.JOSEAlgNotAllowed) return unauthenticated("The bearer token is signed with an algorithm this service does not accept.");
  if (error instanceof errors.JWSSignatureVerificationFailed) return unauthenticated("The bearer token's signature is not valid.");
  if (error instanceof errors.JWKSNoMatchingKey) return unauthenticated("The bearer token is signed with a key the issuer has not published.");
  if (error instanceof errors.JWKSMultipleMatchingKeys) return unauthenticated("The bearer token does not name its signing key (kid), and the issuer publishes several.");
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid || error instanceof errors.JOSENotSupported || error instanceof errors.JWKInvalid) {
    return unauthenticated("The bearer token is not a valid JWT.");
  }
  // The issuer's keys could not be fetched or read (timeout, network, non-200, not a JWKS).
  return issuerUnavailable(error, token);
}
