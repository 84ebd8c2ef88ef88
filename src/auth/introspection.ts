/**
 * Checks opaque tokens through the issuer's RFC 7662 introspection endpoint
 * (openid-client). An active answer is checked again here: issuer, audience,
 * expiry and not-before, as for a JWT.
 */
import * as oidc from "openid-client";
import { issuerUnavailable, unauthenticated } from "./auth-errors.js";

export interface Introspector {
  /** The claims of an active token; throws a RegistryError (401, or 503 when the issuer cannot be asked). */
  introspect(token: string): Promise<Readonly<Record<string, unknown>>>;
}

export interface IntrospectorOptions {
  /** A Configuration from `discovery` made with the introspection client's credentials. */
  readonly configuration: oidc.Configuration;
  readonly audience: string;
  readonly clockSkewSeconds: number;
  /** The clock, in seconds since the epoch; for tests. */
  readonly now?: () => number;
}

export function createIntrospector(options: IntrospectorOptions): Introspector {
  const { configuration, audience, clockSkewSeconds } = options;
  const issuer = configuration.serverMetadata().issuer;
  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  return {
    async introspect(token) {
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
      if (answer.iss !== undefined && answer.iss !== issuer) throw unauthenticated("The bearer token was not issued by the issuer this service trusts.");
      if (answer.aud !== undefined) {
        const audiences = Array.isArray(answer.aud) ? answer.aud : [answer.aud];
        if (!audiences.includes(audience)) throw unauthenticated("The bearer token is not meant for this service (wrong audience).");
      }
      const t = now();
      if (typeof answer.exp === "number" && answer.exp + clockSkewSeconds <= t) throw unauthenticated("The bearer token has expired.");
      if (typeof answer.nbf === "number" && answer.nbf - clockSkewSeconds > t) throw unauthenticated("The bearer token is not valid yet (its nbf is in the future).");
      return answer;
    },
  };
}
