// Opaque access tokens checked by RFC 7662 introspection at a real OpenID
// provider (oidc-provider refuses to introspect its own JWTs, so these tokens
// are for its opaque resource, which has the same audience). Active answers
// are reused for AUTH_INTROSPECTION_CACHE_SECONDS, never past the token's exp;
// the issuer's introspection endpoint is counted (through the injected fetch)
// to show when it is asked, and the clock is injected to move time.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { type Authenticator, createAuthenticator } from "../../src/auth/authenticator.js";
import {
  AUDIENCE,
  OPAQUE_RESOURCE,
  startOidcProvider,
  type TestClient,
  type TestIssuer,
} from "../support/oidc-provider.js";
import { rejection, shown } from "./forge.js";

const client: TestClient = {
  clientId: "opaque-user",
  clientSecret: "opaque-user-secret-0123456789",
  scope: "asor.read asor.write",
  tenant: "acme",
  domains: ["Development"],
};

let issuer: TestIssuer;
let introspectionEndpoint: string;

const environment = (secret: string, extra: Record<string, string> = {}) => ({
  AUTH_ISSUER: issuer.issuer,
  AUTH_ALLOW_HTTP_ISSUER: "true",
  AUTH_AUDIENCE: AUDIENCE,
  AUTH_SCOPE_DOMAINS: JSON.stringify({ "asor.read": ["Setup: Agents"] }),
  AUTH_INTROSPECTION_CLIENT_ID: issuer.introspector.clientId,
  AUTH_INTROSPECTION_CLIENT_SECRET: secret,
  ...extra,
});

/**
 * An authenticator for the test issuer with its own clock (ms) and a count of the requests to the
 * introspection endpoint.
 */
interface Rig {
  readonly authenticator: Authenticator;
  readonly clock: { ms: number };
  introspections(): number;
}

async function rig(extra: Record<string, string> = {}, secret = issuer.introspector.clientSecret): Promise<Rig> {
  const { config, problems } = parseAuthConfig(environment(secret, extra));
  expect(problems).toEqual([]);
  const clock = { ms: Date.now() };
  let introspections = 0;
  const counting: typeof fetch = (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    if (url === introspectionEndpoint) introspections += 1;
    return fetch(input, init);
  };
  const authenticator = await createAuthenticator(config, { fetch: counting, now: () => clock.ms });
  return { authenticator, clock, introspections: () => introspections };
}

/** What the issuer says about a token, asked directly (not counted): for its exp. */
async function introspect(token: string): Promise<{ active: boolean; exp?: number }> {
  const { clientId, clientSecret } = issuer.introspector;
  const response = await fetch(introspectionEndpoint, {
    method: "POST",
    headers: {
      authorization: `Basic ${btoa(`${clientId}:${clientSecret}`)}`,
      "content-type": "application/x-www-form-urlencoded",
    },
    body: new URLSearchParams({ token }),
  });
  return (await response.json()) as { active: boolean; exp?: number };
}

const bearer = (token: string) => `Bearer ${token}`;

beforeAll(async () => {
  issuer = await startOidcProvider([client]);
  const metadata = (await (await fetch(`${issuer.issuer}/.well-known/openid-configuration`)).json()) as {
    introspection_endpoint: string;
  };
  introspectionEndpoint = metadata.introspection_endpoint;
});
afterAll(() => issuer?.close());

describe("opaque tokens through introspection", () => {
  it("accepts an active opaque token and maps the introspected tenant, domains and scopes", async () => {
    const { authenticator } = await rig();
    const token = await issuer.token(client, { resource: OPAQUE_RESOURCE, scope: "asor.read" });
    expect(token).not.toContain(".");
    const principal = await authenticator.authenticate(bearer(token));
    expect(principal.subject).toBe("opaque-user");
    expect(principal.tenant).toBe("acme");
    expect(new Set(principal.domains)).toEqual(new Set(["Development", "Setup: Agents"]));
  });

  it("refuses an opaque token the issuer never issued as not active", async () => {
    const { authenticator } = await rig();
    const token = "n0t-a-real-token_abcdefghijklmnopqrstuvwxyz012345";
    const error = await rejection(authenticator.authenticate(bearer(token)));
    expect(error).toMatchObject({ code: "UNAUTHENTICATED", message: "The bearer token is not active." });
    expect(shown(error)).not.toContain(token);
  });

  it("still verifies JWT access tokens locally when introspection is on", async () => {
    const { authenticator, introspections } = await rig();
    const principal = await authenticator.authenticate(bearer(await issuer.token(client)));
    expect(principal.tenant).toBe("acme");
    expect(introspections()).toBe(0);
  });

  it("says introspection is on, without the introspection secret", async () => {
    const { authenticator } = await rig();
    expect(authenticator.description).toMatch(/introspection on\)$/);
    expect(authenticator.description).not.toContain(issuer.introspector.clientSecret);
  });

  it(
    "answers 503, without the token or the secret, when the issuer refuses the introspection " + "credentials",
    async () => {
      const wrongSecret = "wrong-secret-0123456789abcdef";
      const { authenticator } = await rig({}, wrongSecret);
      const token = await issuer.token(client, { resource: OPAQUE_RESOURCE });
      const error = await rejection(authenticator.authenticate(bearer(token)));
      expect(error.code).toBe("UNAVAILABLE");
      expect(shown(error)).not.toContain(token);
      expect(shown(error)).not.toContain(wrongSecret);
      expect(authenticator.description).not.toContain(wrongSecret);
    },
  );
});

describe("the introspection cache (AUTH_INTROSPECTION_CACHE_SECONDS)", () => {
  it("reuses an active answer for the default 10 seconds, then asks the issuer again", async () => {
    const { authenticator, clock, introspections } = await rig();
    const token = await issuer.token(client, { resource: OPAQUE_RESOURCE });
    const first = await authenticator.authenticate(bearer(token));
    expect(introspections()).toBe(1);
    clock.ms += 9_999;
    expect(await authenticator.authenticate(bearer(token))).toEqual(first);
    expect(introspections()).toBe(1);
    clock.ms += 1;
    expect(await authenticator.authenticate(bearer(token))).toEqual(first);
    expect(introspections()).toBe(2);
  });

  it("keeps an answer for the configured seconds", async () => {
    const { authenticator, clock, introspections } = await rig({ AUTH_INTROSPECTION_CACHE_SECONDS: "3" });
    const token = await issuer.token(client, { resource: OPAQUE_RESOURCE });
    await authenticator.authenticate(bearer(token));
    clock.ms += 2_999;
    await authenticator.authenticate(bearer(token));
    expect(introspections()).toBe(1);
    clock.ms += 1;
    await authenticator.authenticate(bearer(token));
    expect(introspections()).toBe(2);
  });

  it("refuses a revoked token once its cached answer has expired, and not later than that", async () => {
    const { authenticator, clock, introspections } = await rig();
    const token = await issuer.token(client, { resource: OPAQUE_RESOURCE });
    await authenticator.authenticate(bearer(token));
    await issuer.revoke(client, token);
    // Within the cache time the revocation is not seen yet: the price of the cache, documented.
    clock.ms += 5_000;
    expect((await authenticator.authenticate(bearer(token))).tenant).toBe("acme");
    clock.ms += 5_000;
    const error = await rejection(authenticator.authenticate(bearer(token)));
    expect(error).toMatchObject({ code: "UNAUTHENTICATED", message: "The bearer token is not active." });
    expect(shown(error)).not.toContain(token);
    expect(introspections()).toBe(2);
  });

  it("rechecks a token past its cached answer (a watch's recheck), and forgets the token it refuses", async () => {
    const { authenticator, introspections } = await rig();
    const token = await issuer.token(client, { resource: OPAQUE_RESOURCE });
    await authenticator.authenticate(bearer(token));
    expect((await authenticator.recheck(bearer(token))).tenant).toBe("acme");
    expect(introspections()).toBe(2);
    await issuer.revoke(client, token);
    expect((await authenticator.authenticate(bearer(token))).tenant).toBe("acme");
    const error = await rejection(authenticator.recheck(bearer(token)));
    expect(error).toMatchObject({ code: "UNAUTHENTICATED", message: "The bearer token is not active." });
    // Within the cache's 10 s, and still refused: the recheck dropped the cached answer.
    expect((await rejection(authenticator.authenticate(bearer(token)))).code).toBe("UNAUTHENTICATED");
    expect(introspections()).toBe(4);
  });

  it("with 0, asks the issuer on every request, so a revoked token is refused at once", async () => {
    const { authenticator, introspections } = await rig({ AUTH_INTROSPECTION_CACHE_SECONDS: "0" });
    const token = await issuer.token(client, { resource: OPAQUE_RESOURCE });
    for (let i = 0; i < 3; i++) await authenticator.authenticate(bearer(token));
    expect(introspections()).toBe(3);
    await issuer.revoke(client, token);
    const error = await rejection(authenticator.authenticate(bearer(token)));
    expect(error.message).toBe("The bearer token is not active.");
    expect(introspections()).toBe(4);
  });

  it("never caches an inactive answer", async () => {
    const { authenticator, introspections } = await rig();
    const unknown = "n0t-a-real-token_abcdefghijklmnopqrstuvwxyz012345";
    const revoked = await issuer.token(client, { resource: OPAQUE_RESOURCE });
    await issuer.revoke(client, revoked);
    for (const token of [unknown, revoked, unknown, revoked]) {
      expect((await rejection(authenticator.authenticate(bearer(token)))).message).toBe(
        "The bearer token is not active.",
      );
    }
    expect(introspections()).toBe(4);
  });

  it("never caches the issuer's failure: each request asks again", async () => {
    const { authenticator, introspections } = await rig({}, "wrong-secret-0123456789abcdef");
    const token = await issuer.token(client, { resource: OPAQUE_RESOURCE });
    for (let i = 0; i < 3; i++)
      expect((await rejection(authenticator.authenticate(bearer(token)))).code).toBe("UNAVAILABLE");
    expect(introspections()).toBe(3);
  });

  it("never keeps an answer past the token's exp, even within the cache time", async () => {
    const { authenticator, clock, introspections } = await rig({
      AUTH_INTROSPECTION_CACHE_SECONDS: "60",
      AUTH_CLOCK_SKEW_SECONDS: "0",
    });
    const token = await issuer.token(client, { resource: OPAQUE_RESOURCE });
    const { exp } = await introspect(token);
    if (exp === undefined) throw new Error("the issuer's introspection answer has no exp");
    // Five seconds before the token expires (by the service's clock; the issuer still answers "active").
    clock.ms = exp * 1000 - 5_000;
    await authenticator.authenticate(bearer(token));
    clock.ms = exp * 1000 - 1;
    await authenticator.authenticate(bearer(token));
    expect(introspections()).toBe(1);
    clock.ms = exp * 1000;
    const error = await rejection(authenticator.authenticate(bearer(token)));
    expect(error.message).toBe("The bearer token has expired.");
    expect(introspections()).toBe(2);
  });
});
