/**
 * Checks opaque tokens through the issuer's RFC 7662 introspection endpoint
 * (openid-client). An active answer is checked again here: issuer, audience
 * (both required unless configured otherwise), expiry, not-before, issue time
 * and lifetime, as for a JWT. Requests to the issuer are rate-limited.
 */
import * as oidc from "openid-client";
import { DEFAULT_INTROSPECTION_MAX_PER_SECOND, DEFAULT_MAX_TOKEN_LIFETIME_SECONDS } from "./auth-config.js";
import { checkIssuedAtAndLifetime, issuerUnavailable, tooManyIntrospections, unauthenticated } from "./auth-errors.js";

export interface Introspector {
  /** The claims of an active token; throws a RegistryError (401, or 503 when the issuer cannot be asked). */
  introspect(token: string): Promise<Readonly<Record<string, unknown>>>;
}

export interface IntrospectorOptions {
  /** A Configuration from `discovery` made with the introspection client's credentials. */
  readonly configuration: oidc.Configuration;
  readonly audience: string;
  readonly clockSkewSeconds: number;
  /** Whether an active answer must carry `iss` and `aud` (AuthConfig.introspectionRequireIssAud); default true. */
  readonly requireIssAud?: boolean;
  /** The longest lifetime accepted (`exp` - `iat`), in seconds; default 24 h. */
  readonly maxTokenLifetimeSeconds?: number;
  /** The most requests to the introspection endpoint per second (a burst of as many); default 20. */
  readonly maxPerSecond?: number;
  /** The clock, in seconds since the epoch; for tests. */
  readonly now?: () => number;
}

/**
 * A token bucket: `rate` tokens a second, at most `rate` held. Each
 * introspection takes one; none left, and the token is refused (503) without
 * asking the issuer. Random opaque tokens are all cache misses, so without it
 * every one of them was a request to the issuer.
 */
function createRateLimit(rate: number, now: () => number): () => boolean {
  let tokens = rate;
  let at = now();
  return () => {
    const t = now();
    tokens = Math.min(rate, tokens + (t - at) * rate);
    at = t;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  };
}

export function createIntrospector(options: IntrospectorOptions): Introspector {
  const { configuration, audience, clockSkewSeconds } = options;
  const requireIssAud = options.requireIssAud ?? true;
  const maxLifetime = options.maxTokenLifetimeSeconds ?? DEFAULT_MAX_TOKEN_LIFETIME_SECONDS;
  const issuer = configuration.serverMetadata().issuer;
  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  const allowed = createRateLimit(options.maxPerSecond ?? DEFAULT_INTROSPECTION_MAX_PER_SECOND, now);
  return {
    async introspect(token) {
      if (!allowed()) throw tooManyIntrospections();
      let answer: oidc.IntrospectionResponse;
      try {
        answer = await oidc.tokenIntrospection(configuration, token, { token_type_hint: "access_token" });
      } catch (error: unknown) {
        throw issuerUnavailable(error, token);
      }
      if (answer.active !== true) throw unauthenticated("The bearer token is not active.");
      if (answer.token_type !== undefined && answer.token_type.toLowerCase() === "refresh_token") {
        throw unauthenticated("The bearer token is a refresh token, not an access token.");
      }
      if (requireIssAud && (answer.iss === undefined || answer.aud === undefined)) {
        throw unauthenticated(
          "The issuer's introspection answer does not name its issuer and audience (iss, aud), so the token cannot " +
            "be taken as meant for this service.",
        );
      }
      if (answer.iss !== undefined && answer.iss !== issuer)
        throw unauthenticated("The bearer token was not issued by the issuer this service trusts.");
      if (answer.aud !== undefined) {
        const audiences = Array.isArray(answer.aud) ? answer.aud : [answer.aud];
        if (!audiences.includes(audience))
          throw unauthenticated("The bearer token is not meant for this service (wrong audience).");
      }
      const t = now();
      if (typeof answer.exp === "number" && answer.exp + clockSkewSeconds <= t)
        throw unauthenticated("The bearer token has expired.");
      if (typeof answer.nbf === "number" && answer.nbf - clockSkewSeconds > t)
        throw unauthenticated("The bearer token is not valid yet (its nbf is in the future).");
      checkIssuedAtAndLifetime(answer, t, clockSkewSeconds, maxLifetime);
      return answer;
    },
  };
}
