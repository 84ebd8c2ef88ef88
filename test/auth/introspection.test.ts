// Opaque access tokens checked by RFC 7662 introspection at a real OpenID
// provider (oidc-provider refuses to introspect its own JWTs, so these tokens
// are for its opaque resource, which has the same audience).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { createAuthenticator, type Authenticator } from "../../src/auth/authenticator.js";
import { AUDIENCE, OPAQUE_RESOURCE, startOidcProvider, type TestClient, type TestIssuer } from "../support/oidc-provider.js";
import { rejection, shown } from "./forge.js";

const client: TestClient = { clientId: "opaque-user", clientSecret: "opaque-user-secret-0123456789", scope: "asor.read asor.write", tenant: "acme", domains: ["Development"] };

let issuer: TestIssuer;
let authenticator: Authenticator;

const environment = (secret: string) => ({
  AUTH_ISSUER: issuer.issuer,
  AUTH_ALLOW_HTTP_ISSUER: "true",
  AUTH_AUDIENCE: AUDIENCE,
  AUTH_SCOPE_DOMAINS: JSON.stringify({ "asor.read": ["Setup: Agents"] }),
  AUTH_INTROSPECTION_CLIENT_ID: issuer.introspector.clientId,
  AUTH_INTROSPECTION_CLIENT_SECRET: secret,
});

beforeAll(async () => {
  issuer = await startOidcProvider([client]);
  const { config, problems } = parseAuthConfig(environment(issuer.introspector.clientSecret));
  expect(problems).toEqual([]);
  authenticator = await createAuthenticator(config, {});
});
afterAll(() => issuer?.close());

describe("opaque tokens through introspection", () => {
  it("accepts an active opaque token and maps the introspected tenant, domains and scopes", async () => {
    const token = await issuer.token(client, { resource: OPAQUE_RESOURCE, scope: "asor.read" });
    expect(token).not.toContain(".");
    const principal = await authenticator.authenticate(`Bearer ${token}`);
    expect(principal.subject).toBe("opaque-user");
    expect(principal.tenant).toBe("acme");
    expect(new Set(principal.domains)).toEqual(new Set(["Development", "Setup: Agents"]));
  });

  it("refuses a revoked opaque token as not active", async () => {
    const token = await issuer.token(client, { resource: OPAQUE_RESOURCE });
    await authenticator.authenticate(`Bearer ${token}`);
    await issuer.revoke(client, token);
    const error = await rejection(authenticator.authenticate(`Bearer ${token}`));
    expect(error).toMatchObject({ kind: "unauthenticated", code: "UNAUTHENTICATED", message: "The bearer token is not active." });
    expect(shown(error)).not.toContain(token);
  });

  it("refuses an opaque token the issuer never issued as not active", async () => {
    const token = "n0t-a-real-token_abcdefghijklmnopqrstuvwxyz012345";
    const error = await rejection(authenticator.authenticate(`Bearer ${token}`));
    expect(error.message).toBe("The bearer token is not active.");
    expect(shown(error)).not.toContain(token);
  });

  it("still verifies JWT access tokens locally when introspection is on", async () => {
    const principal = await authenticator.authenticate(`Bearer ${await issuer.token(client)}`);
    expect(principal.tenant).toBe("acme");
  });

  it("says introspection is on, without the introspection secret", () => {
    expect(authenticator.description).toMatch(/introspection on\)$/);
    expect(authenticator.description).not.toContain(issuer.introspector.clientSecret);
  });

  it("answers 503, without the token or the secret, when the issuer refuses the introspection credentials", async () => {
    const wrongSecret = "wrong-secret-0123456789abcdef";
    const { config } = parseAuthConfig(environment(wrongSecret));
    const misconfigured = await createAuthenticator(config, {});
    const token = await issuer.token(client, { resource: OPAQUE_RESOURCE });
    const error = await rejection(misconfigured.authenticate(`Bearer ${token}`));
    expect(error.kind).toBe("unavailable");
    expect(shown(error)).not.toContain(token);
    expect(shown(error)).not.toContain(wrongSecret);
    expect(misconfigured.description).not.toContain(wrongSecret);
  });
});
