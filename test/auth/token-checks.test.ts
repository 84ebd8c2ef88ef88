// What a token must be besides well signed, against a real OpenID provider
// (oidc-provider on loopback): an access token and not an ID token, issued in
// the past, with a bounded lifetime; introspection answers that name this
// service; and a failing or flooded issuer asked at a bounded rate. The
// authenticator's clock is injected where time must move.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { type Authenticator, createAuthenticator } from "../../src/auth/authenticator.js";
import {
  AUDIENCE,
  OPAQUE_RESOURCE,
  startOidcProvider,
  type TestClient,
  type TestIssuer,
} from "../support/oidc-provider.js";
import { newKey, now, rejection, sign } from "./forge.js";

/**
 * A client whose id is the API's audience: its ID tokens name `aud: asor`, the confusion RFC 9068's typ
 * guards against.
 */
const sameNameClient: TestClient = { clientId: AUDIENCE, clientSecret: "asor-client-secret-0123456789" };
const worker: TestClient = {
  clientId: "worker",
  clientSecret: "worker-secret-0123456789",
  tenant: "acme",
  domains: ["Development"],
};

let issuer: TestIssuer;
beforeAll(async () => {
  issuer = await startOidcProvider([sameNameClient, worker]);
});
afterAll(() => issuer?.close());
afterEach(() => {
  issuer.faults.jwksDown = false;
  issuer.faults.introspectionAnswer = undefined;
});

interface Rig {
  readonly authenticator: Authenticator;
  readonly clock: { ms: number };
}

async function rig(extra: Record<string, string> = {}): Promise<Rig> {
  const { config, problems } = parseAuthConfig({
    AUTH_ISSUER: issuer.issuer,
    AUTH_ALLOW_HTTP_ISSUER: "true",
    AUTH_AUDIENCE: AUDIENCE,
    ...extra,
  });
  expect(problems).toEqual([]);
  const clock = { ms: Date.now() };
  return { authenticator: await createAuthenticator(config, { now: () => clock.ms }), clock };
}
const introspecting = () => ({
  AUTH_INTROSPECTION_CLIENT_ID: issuer.introspector.clientId,
  AUTH_INTROSPECTION_CLIENT_SECRET: issuer.introspector.clientSecret,
});

const bearer = (token: string) => `Bearer ${token}`;
const claims = () => ({
  iss: issuer.issuer,
  aud: AUDIENCE,
  sub: "worker",
  client_id: "worker",
  tenant: "acme",
  iat: now(),
  exp: now() + 600,
});

describe("ID tokens presented as access tokens", () => {
  it("refuses a real ID token of the issuer whose audience is this service (no typ at+jwt)", async () => {
    const { authenticator } = await rig();
    const idToken = await issuer.idToken(sameNameClient, "alice");
    const error = await rejection(authenticator.authenticate(bearer(idToken)));
    expect(error.code).toBe("UNAUTHENTICATED");
    expect(error.message).toMatch(/not an access token/);
    // The issuer's own access tokens carry typ at+jwt and pass.
    expect((await authenticator.authenticate(bearer(await issuer.token(worker)))).tenant).toBe("acme");
  });

  it(
    "with AUTH_REQUIRE_AT_JWT_TYP=false accepts a JWT typed JWT, and still refuses the real ID token by its " +
      "claims",
    async () => {
      const { authenticator } = await rig({ AUTH_REQUIRE_AT_JWT_TYP: "false" });
      const plain = await sign(issuer.signingKey, issuer.kid, claims(), { typ: "JWT" });
      expect((await authenticator.authenticate(bearer(plain))).tenant).toBe("acme");
      const idToken = await issuer.idToken(sameNameClient, "alice");
      expect((await rejection(authenticator.authenticate(bearer(idToken)))).message).toMatch(/not an access token/);
      const otherType = await sign(issuer.signingKey, issuer.kid, claims(), { typ: "logout+jwt" });
      expect((await rejection(authenticator.authenticate(bearer(otherType)))).message).toMatch(/not an access token/);
    },
  );

  it("by default refuses a JWT typed JWT, even from the trusted key", async () => {
    const { authenticator } = await rig();
    const plain = await sign(issuer.signingKey, issuer.kid, claims(), { typ: "JWT" });
    expect((await rejection(authenticator.authenticate(bearer(plain)))).message).toMatch(/not an access token/);
  });
});

describe("issue time and lifetime", () => {
  it("refuses a token issued in the future beyond the clock skew, and tolerates one within it", async () => {
    const { authenticator } = await rig();
    const future = await sign(issuer.signingKey, issuer.kid, { ...claims(), iat: now() + 120, exp: now() + 600 });
    expect((await rejection(authenticator.authenticate(bearer(future)))).message).toMatch(/issued in the future/);
    const withinSkew = await sign(issuer.signingKey, issuer.kid, { ...claims(), iat: now() + 10 });
    expect((await authenticator.authenticate(bearer(withinSkew))).tenant).toBe("acme");
  });

  it("refuses a lifetime over 24 hours by default, with or without iat, and accepts 24 hours", async () => {
    const { authenticator } = await rig();
    const long = await sign(issuer.signingKey, issuer.kid, { ...claims(), exp: now() + 25 * 3600 });
    expect((await rejection(authenticator.authenticate(bearer(long)))).message).toMatch(
      /lifetime .* longer than this service accepts \(86400 s\)/,
    );
    const { iat: _iat, ...noIat } = claims();
    const longNoIat = await sign(issuer.signingKey, issuer.kid, { ...noIat, exp: now() + 25 * 3600 });
    expect((await rejection(authenticator.authenticate(bearer(longNoIat)))).message).toMatch(/lifetime/);
    const day = await sign(issuer.signingKey, issuer.kid, { ...claims(), exp: now() + 24 * 3600 });
    expect((await authenticator.authenticate(bearer(day))).tenant).toBe("acme");
  });

  it("takes the maximum lifetime from AUTH_MAX_TOKEN_LIFETIME_SECONDS", async () => {
    const { authenticator } = await rig({ AUTH_MAX_TOKEN_LIFETIME_SECONDS: "300" });
    // The issuer's own tokens live 600 s.
    expect((await rejection(authenticator.authenticate(bearer(await issuer.token(worker))))).message).toMatch(
      /\(300 s\)/,
    );
  });
});

describe("introspection answers", () => {
  it(
    "refuses a bare {active: true}, and an answer without aud, unless " + "AUTH_INTROSPECTION_REQUIRE_ISS_AUD=false",
    async () => {
      const strict = await rig(introspecting());
      const token = await issuer.token(worker, { resource: OPAQUE_RESOURCE });
      issuer.faults.introspectionAnswer = () => ({ active: true });
      expect((await rejection(strict.authenticator.authenticate(bearer(token)))).message).toMatch(
        /does not name its issuer and audience/,
      );
      issuer.faults.introspectionAnswer = ({ aud: _aud, ...answer }) => answer;
      expect((await rejection(strict.authenticator.authenticate(bearer(token)))).message).toMatch(
        /does not name its issuer and audience/,
      );

      const lax = await rig({ ...introspecting(), AUTH_INTROSPECTION_REQUIRE_ISS_AUD: "false" });
      expect((await lax.authenticator.authenticate(bearer(token))).tenant).toBe("acme");
      // What the answer does carry is still checked.
      issuer.faults.introspectionAnswer = (answer) => ({ ...answer, aud: "another-api" });
      const other = await issuer.token(worker, { resource: OPAQUE_RESOURCE });
      expect((await rejection(lax.authenticator.authenticate(bearer(other)))).message).toMatch(/wrong audience/);
    },
  );

  it("accepts the issuer's full answers, which name both", async () => {
    const { authenticator } = await rig(introspecting());
    expect(
      (await authenticator.authenticate(bearer(await issuer.token(worker, { resource: OPAQUE_RESOURCE })))).tenant,
    ).toBe("acme");
  });
});

describe("a flood of random opaque tokens", () => {
  it("asks the issuer at most AUTH_INTROSPECTION_MAX_PER_SECOND times a second, answering the rest 503", async () => {
    const { authenticator, clock } = await rig({ ...introspecting(), AUTH_INTROSPECTION_MAX_PER_SECOND: "5" });
    const before = issuer.requests("/token/introspection");
    const random = () => `${crypto.randomUUID()}${crypto.randomUUID()}`.replaceAll("-", "");
    const codes = await Promise.all(
      Array.from({ length: 60 }, async () => (await rejection(authenticator.authenticate(bearer(random())))).code),
    );
    expect(issuer.requests("/token/introspection") - before).toBe(5);
    expect(codes.filter((c) => c === "UNAUTHENTICATED")).toHaveLength(5);
    expect(codes.filter((c) => c === "UNAVAILABLE")).toHaveLength(55);
    // A second later, five more; a real token is among them and is accepted.
    clock.ms += 1000;
    const real = await issuer.token(worker, { resource: OPAQUE_RESOURCE });
    expect((await authenticator.authenticate(bearer(real))).tenant).toBe("acme");
    await Promise.all(
      Array.from({ length: 20 }, () => authenticator.authenticate(bearer(random())).catch(() => undefined)),
    );
    expect(issuer.requests("/token/introspection") - before).toBe(10);
  });
});

describe("a failing JWKS endpoint", () => {
  it(
    "is asked once per cooldown however many tokens with unknown kids arrive, each answered 503 without a stack " +
      "trace",
    async () => {
      const { authenticator, clock } = await rig();
      issuer.faults.jwksDown = true;
      const before = issuer.requests("/jwks");
      for (let i = 0; i < 25; i++) {
        const { privateKey } = await newKey();
        const token = await sign(privateKey, `random-kid-${i}`, claims());
        const error = await rejection(authenticator.authenticate(bearer(token)));
        expect(error.code).toBe("UNAVAILABLE");
        expect(error.stack).toBeUndefined();
        expect((error.cause as Error).stack).toBeUndefined();
      }
      expect(issuer.requests("/jwks") - before).toBe(1);
      // The issuer's own tokens wait for the same cooldown (no keys yet), then pass once the endpoint is back.
      const real = await issuer.token(worker);
      expect((await rejection(authenticator.authenticate(bearer(real)))).code).toBe("UNAVAILABLE");
      expect(issuer.requests("/jwks") - before).toBe(1);
      issuer.faults.jwksDown = false;
      clock.ms += 10_000;
      expect((await authenticator.authenticate(bearer(real))).tenant).toBe("acme");
      expect(issuer.requests("/jwks") - before).toBe(2);
    },
  );

  it(
    "keeps verifying with the keys it has while the endpoint fails, refusing only tokens that would need a " +
      "refetch",
    async () => {
      const { authenticator, clock } = await rig();
      expect((await authenticator.authenticate(bearer(await issuer.token(worker)))).tenant).toBe("acme");
      const before = issuer.requests("/jwks");
      issuer.faults.jwksDown = true;
      clock.ms += 11_000;
      const { privateKey } = await newKey();
      for (let i = 0; i < 10; i++) {
        expect(
          (await rejection(authenticator.authenticate(bearer(await sign(privateKey, `rotated-${i}`, claims()))))).code,
        ).toBe("UNAVAILABLE");
        expect((await authenticator.authenticate(bearer(await issuer.token(worker)))).tenant).toBe("acme");
      }
      expect(issuer.requests("/jwks") - before).toBe(1);
    },
  );
});
