// The authenticator as an OAuth2 resource server for a real OpenID provider
// (oidc-provider on loopback): what it accepts, what it refuses and why, and
// that no refusal repeats the token.

import { type CryptoKey, importJWK } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { type Authenticator, createAuthenticator } from "../../src/auth/authenticator.js";
import { errorBody } from "../../src/domain/errors.js";
import { AUDIENCE, startOidcProvider, type TestClient, type TestIssuer } from "../support/oidc-provider.js";
import { hmacWithPublicKey, newKey, now, rejection, shown, sign, tamper, unsigned } from "./forge.js";

const agentsAdmin: TestClient = {
  clientId: "agents-admin",
  clientSecret: "agents-admin-secret-0123456789",
  scope: "asor.read asor.write",
  tenant: "acme",
  domains: ["Development"],
};
const scopedOnly: TestClient = {
  clientId: "scoped-only",
  clientSecret: "scoped-only-secret-0123456789",
  scope: "asor.read asor.write",
};

let issuer: TestIssuer;
let authenticator: Authenticator;
let issuerPublicKey: CryptoKey;

beforeAll(async () => {
  issuer = await startOidcProvider([agentsAdmin, scopedOnly]);
  const { config, problems } = parseAuthConfig({
    AUTH_ISSUER: issuer.issuer,
    AUTH_ALLOW_HTTP_ISSUER: "true",
    AUTH_AUDIENCE: AUDIENCE,
    AUTH_SCOPE_DOMAINS: JSON.stringify({ "asor.read": ["Setup: Agents"], "asor.write": ["Development"] }),
  });
  expect(problems).toEqual([]);
  authenticator = await createAuthenticator(config, {});
  issuerPublicKey = (await importJWK(issuer.publicJwk, "ES256")) as CryptoKey;
});
afterAll(() => issuer?.close());

/** Claims a real access token from the issuer would carry, valid now. */
const validClaims = () => ({
  iss: issuer.issuer,
  aud: AUDIENCE,
  sub: "agents-admin",
  client_id: "agents-admin",
  tenant: "acme",
  domains: ["Development"],
  iat: now(),
  exp: now() + 600,
});

describe("accepted tokens", () => {
  it(
    "accepts a client_credentials JWT access token from the issuer and maps its tenant and domains " + "claims",
    async () => {
      const token = await issuer.token(agentsAdmin);
      expect(token.split(".")).toHaveLength(3);
      const principal = await authenticator.authenticate(`Bearer ${token}`);
      expect(principal.subject).toBe("agents-admin");
      expect(principal.tenant).toBe("acme");
      expect([...principal.domains]).toEqual(["Development"]);
    },
  );

  it("grants the domains of the token's scopes through the scope-to-domain map", async () => {
    const readOnly = await authenticator.authenticate(
      `Bearer ${await issuer.token(scopedOnly, { scope: "asor.read" })}`,
    );
    expect([...readOnly.domains]).toEqual(["Setup: Agents"]);
    const both = await authenticator.authenticate(
      `Bearer ${await issuer.token(scopedOnly, { scope: "asor.read asor.write" })}`,
    );
    expect(new Set(both.domains)).toEqual(new Set(["Setup: Agents", "Development"]));
  });

  it("gives a null tenant and no domains when the token has neither claim nor mapped scope", async () => {
    const principal = await authenticator.authenticate(`Bearer ${await issuer.token(scopedOnly)}`);
    expect(principal).toMatchObject({ subject: "scoped-only", tenant: null });
    expect(principal.domains.size).toBe(0);
  });

  it("accepts the scheme name in any case (RFC 7235)", async () => {
    const principal = await authenticator.authenticate(`bearer ${await issuer.token(agentsAdmin)}`);
    expect(principal.tenant).toBe("acme");
  });

  it("tolerates a token that expired within the clock skew", async () => {
    const token = await sign(issuer.signingKey, issuer.kid, { ...validClaims(), iat: now() - 600, exp: now() - 10 });
    expect((await authenticator.authenticate(`Bearer ${token}`)).tenant).toBe("acme");
  });

  it("says which mode is in force, naming the issuer and audience and no secret", () => {
    expect(authenticator.description).toBe(
      `OAuth2 resource server for ${issuer.issuer} (audience "asor"; JWT via JWKS, RS256/PS256/ES256/EdDSA; ` +
        `introspection off)`,
    );
  });
});

describe("refused requests", () => {
  const refuses = async (authorization: string | null, message: RegExp, token?: string) => {
    const error = await rejection(authenticator.authenticate(authorization));
    expect(error.code).toBe("UNAUTHENTICATED");
    expect(error.message).toMatch(message);
    // The 401 body names the problem once, in the validation shape.
    expect(errorBody(error)).toEqual({
      error: error.message,
      errors: [{ error: error.message, code: "UNAUTHENTICATED" }],
    });
    if (token !== undefined) expect(shown(error)).not.toContain(token);
    return error;
  };

  it("refuses a request without a token", async () => {
    await refuses(null, /^No bearer token was sent\.$/);
    await refuses("", /^No bearer token was sent\.$/);
  });

  it("refuses an Authorization header that is not 'Bearer <token>'", async () => {
    const token = await issuer.token(agentsAdmin);
    for (const header of [
      `Basic ${token}`,
      token,
      "Bearer",
      `Bearer ${token} extra`,
      `Bearer\t${token}`,
      `Token ${token}`,
    ]) {
      await refuses(header, /^The Authorization header is not of the form 'Bearer <token>'\.$/, token);
    }
  });

  it("refuses an oversized token before parsing it", async () => {
    const token = `${"a".repeat(20_000)}.b.c`;
    await refuses(`Bearer ${token}`, /longer than 16384 characters/, token);
  });

  it("refuses an expired token (exp beyond the clock skew)", async () => {
    const token = await sign(issuer.signingKey, issuer.kid, { ...validClaims(), iat: now() - 900, exp: now() - 120 });
    await refuses(`Bearer ${token}`, /has expired/, token);
  });

  it("refuses a token that is not valid yet (nbf beyond the clock skew)", async () => {
    const token = await sign(issuer.signingKey, issuer.kid, { ...validClaims(), nbf: now() + 120 });
    await refuses(`Bearer ${token}`, /not valid yet/, token);
  });

  it("refuses a token without an expiry", async () => {
    const { exp: _exp, ...claims } = validClaims();
    const token = await sign(issuer.signingKey, issuer.kid, claims);
    await refuses(`Bearer ${token}`, /no valid expiry/, token);
  });

  it("refuses a token from another issuer, even signed with the trusted key", async () => {
    const token = await sign(issuer.signingKey, issuer.kid, {
      ...validClaims(),
      iss: "http://127.0.0.1:9/not-the-issuer",
    });
    await refuses(`Bearer ${token}`, /not issued by the issuer this service trusts/, token);
  });

  it("refuses a token for another audience", async () => {
    const token = await sign(issuer.signingKey, issuer.kid, { ...validClaims(), aud: "another-api" });
    await refuses(`Bearer ${token}`, /wrong audience/, token);
  });

  it("refuses a token whose payload was tampered with after signing", async () => {
    const genuine = await issuer.token(agentsAdmin);
    const token = tamper(genuine, (claims) => {
      claims.tenant = "someone-else";
    });
    await refuses(`Bearer ${token}`, /signature is not valid/, token);
  });

  it("refuses an unsigned token (alg none)", async () => {
    const token = unsigned(validClaims());
    await refuses(`Bearer ${token}`, /algorithm this service does not accept/, token);
  });

  it("refuses HS256 tokens whose HMAC secret is the issuer's public key (JWK and PEM)", async () => {
    const tokens = await hmacWithPublicKey(issuer.publicJwk, issuerPublicKey, issuer.kid, validClaims());
    expect(tokens).toHaveLength(2);
    for (const token of tokens) await refuses(`Bearer ${token}`, /algorithm this service does not accept/, token);
  });

  it("refuses a token signed with a key the issuer never published", async () => {
    const { privateKey } = await newKey();
    const token = await sign(privateKey, "attacker-key", validClaims());
    await refuses(`Bearer ${token}`, /key the issuer has not published/, token);
  });

  it("refuses a token signed with another key that claims the issuer's kid", async () => {
    const { privateKey } = await newKey();
    const token = await sign(privateKey, issuer.kid, validClaims());
    await refuses(`Bearer ${token}`, /signature is not valid/, token);
  });

  it("refuses an opaque token when no introspection is configured", async () => {
    const token = "2YotnFZFEjr1zCsicMWpAA-opaque";
    await refuses(`Bearer ${token}`, /not a JWT, and this service has no token introspection configured/, token);
  });

  it('refuses a tenant claim that is there but not a non-empty string: a list, a number, "" or null', async () => {
    for (const tenant of [["acme", "other"], 7, "", null]) {
      const token = await sign(issuer.signingKey, issuer.kid, { ...validClaims(), tenant });
      await refuses(`Bearer ${token}`, /"tenant" claim is not a tenant name/, token);
    }
  });
});
