// The verified-token cache: a token accepted once is not verified again for up
// to 60 s, never past its exp, and only that exact token (the key is the hash
// of all of it) is spared; failures are never remembered; the cache is
// bounded and drops the least recently used entry. Real ES256 tokens from the
// local development issuer and from a real OpenID provider; the clock is
// injected, and verifications are counted at the verifier.

import { type CryptoKey, createLocalJWKSet, importJWK, type JWK, type JWTPayload, type JWTVerifyGetKey } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { type Authenticator, authenticatorFrom, createAuthenticator } from "../../src/auth/authenticator.js";
import { createJwtVerifier, type JwtVerifier } from "../../src/auth/jwt-verifier.js";
import { type KeyStore, LOCAL_ISSUER, openLocalIssuer } from "../../src/auth/local-issuer.js";
import type { ClaimMapping } from "../../src/auth/principal.js";
import {
  createTokenCache,
  TOKEN_CACHE_MAX_AGE_MS,
  TOKEN_CACHE_MAX_ENTRIES,
  tokenKey,
} from "../../src/auth/token-cache.js";
import { AUDIENCE, startOidcProvider, type TestClient, type TestIssuer } from "../support/oidc-provider.js";
import { rejection, shown, sign, tamper } from "./forge.js";

/** A KeyStore in memory, so these tests make no files. */
function memoryKeyStore(): KeyStore & { stored(): string } {
  let key: string | undefined;
  return {
    readKey: async () => key,
    writeKey: async (jwk) => {
      if (key !== undefined) throw new Error("a key exists already");
      key = jwk;
    },
    stored: () => {
      if (key === undefined) throw new Error("no key yet");
      return key;
    },
  };
}

const mapping: ClaimMapping = { tenantClaim: "tenant", domainsClaim: "domains", scopeDomains: new Map() };
const bearer = (token: string) => `Bearer ${token}`;

/**
 * An authenticator over the local issuer's real verifier, assembled as
 * createAuthenticator assembles it, with the verifier's calls counted and the
 * key lookup optionally made to fail (as an unreachable JWKS would).
 */
interface Rig {
  readonly authenticator: Authenticator;
  readonly clock: { ms: number };
  /** The issuer's private key and kid, to sign tokens with chosen claims. */
  readonly key: CryptoKey;
  readonly kid: string;
  verifications(): number;
  /** Makes the next key lookup throw (a network error: the verifier answers 503). */
  failNextKeyLookup(): void;
  /** Claims of a valid token, relative to the rig's clock. */
  claims(extra?: JWTPayload): JWTPayload;
}

async function rig(options: { clockSkewSeconds?: number; maxEntries?: number } = {}): Promise<Rig> {
  const store = memoryKeyStore();
  const issuer = await openLocalIssuer(store, { audience: "asor", tenantClaim: "tenant", domainsClaim: "domains" });
  const jwk = JSON.parse(store.stored()) as JWK;
  const key = (await importJWK(jwk, "ES256")) as CryptoKey;
  const clock = { ms: Date.now() };
  const now = () => clock.ms;
  const localKeys = createLocalJWKSet(issuer.jwks);
  let failNext = false;
  const keys: JWTVerifyGetKey = (header, token) => {
    if (failNext) {
      failNext = false;
      throw new Error("connect ECONNREFUSED 127.0.0.1:9");
    }
    return localKeys(header, token);
  };
  const real = createJwtVerifier({
    issuer: LOCAL_ISSUER,
    audience: "asor",
    algorithms: ["ES256"],
    clockSkewSeconds: options.clockSkewSeconds ?? 30,
    keys,
    now,
  });
  let verifications = 0;
  const verifier: JwtVerifier = {
    verify(token) {
      verifications += 1;
      return real.verify(token);
    },
  };
  const authenticator = authenticatorFrom({
    description: "test",
    verifier,
    introspector: undefined,
    introspectionCacheSeconds: 0,
    mapping,
    now,
    ...(options.maxEntries === undefined ? {} : { cache: { maxEntries: options.maxEntries } }),
  });
  const seconds = () => Math.floor(clock.ms / 1000);
  return {
    authenticator,
    clock,
    key,
    kid: jwk.kid as string,
    verifications: () => verifications,
    failNextKeyLookup: () => {
      failNext = true;
    },
    claims: (extra = {}) => ({
      iss: LOCAL_ISSUER,
      aud: "asor",
      sub: "developer",
      tenant: "acme",
      domains: ["Development"],
      iat: seconds(),
      exp: seconds() + 3600,
      ...extra,
    }),
  };
}

describe("the verified-token cache", () => {
  it("verifies a token once within 60 s and again after 60 s", async () => {
    const r = await rig();
    const token = await sign(r.key, r.kid, r.claims());
    const first = await r.authenticator.authenticate(bearer(token));
    expect(first).toMatchObject({ subject: "developer", tenant: "acme" });
    expect(r.verifications()).toBe(1);
    r.clock.ms += TOKEN_CACHE_MAX_AGE_MS - 1;
    expect(await r.authenticator.authenticate(bearer(token))).toEqual(first);
    expect(r.verifications()).toBe(1);
    r.clock.ms += 1;
    expect(await r.authenticator.authenticate(bearer(token))).toEqual(first);
    expect(r.verifications()).toBe(2);
    // The second verification was cached afresh.
    r.clock.ms += 1_000;
    await r.authenticator.authenticate(bearer(token));
    expect(r.verifications()).toBe(2);
  });

  it("never serves a token at or past its exp: with no clock skew it is refused", async () => {
    const r = await rig({ clockSkewSeconds: 0 });
    const claims = r.claims({ exp: Math.floor(r.clock.ms / 1000) + 30 });
    const token = await sign(r.key, r.kid, claims);
    await r.authenticator.authenticate(bearer(token));
    r.clock.ms = (claims.exp as number) * 1000 - 1;
    await r.authenticator.authenticate(bearer(token));
    expect(r.verifications()).toBe(1);
    r.clock.ms = (claims.exp as number) * 1000;
    const error = await rejection(r.authenticator.authenticate(bearer(token)));
    expect(error).toMatchObject({ code: "UNAUTHENTICATED", message: "The bearer token has expired." });
    expect(r.verifications()).toBe(2);
  });

  it("adds no clock skew on a hit: past exp the verifier decides, every time", async () => {
    const r = await rig({ clockSkewSeconds: 30 });
    const claims = r.claims({ exp: Math.floor(r.clock.ms / 1000) + 20 });
    const token = await sign(r.key, r.kid, claims);
    await r.authenticator.authenticate(bearer(token));
    r.clock.ms = (claims.exp as number) * 1000 + 5_000;
    // Within the verifier's skew the token is still accepted, but by a verification, and not cached for later.
    await r.authenticator.authenticate(bearer(token));
    await r.authenticator.authenticate(bearer(token));
    expect(r.verifications()).toBe(3);
    r.clock.ms = (claims.exp as number) * 1000 + 30_000;
    expect((await rejection(r.authenticator.authenticate(bearer(token)))).message).toBe(
      "The bearer token has expired.",
    );
    expect(r.verifications()).toBe(4);
  });

  it("never admits a token whose signature was not checked, though its genuine twin is cached", async () => {
    const r = await rig();
    const genuine = await sign(r.key, r.kid, r.claims());
    await r.authenticator.authenticate(bearer(genuine));
    const [header, payload, signature] = genuine.split(".") as [string, string, string];
    // A character in the middle of the signature: the last one may only change padding bits.
    const middle = Math.floor(signature.length / 2);
    const flipped = signature[middle] === "A" ? "B" : "A";
    const forged = `${signature.slice(0, middle)}${flipped}${signature.slice(middle + 1)}`;
    const forgedSignature = `${header}.${payload}.${forged}`;
    const forgedPayload = tamper(genuine, (c) => {
      c.tenant = "someone-else";
    });
    for (const token of [forgedSignature, forgedPayload]) {
      const error = await rejection(r.authenticator.authenticate(bearer(token)));
      expect(error).toMatchObject({ code: "UNAUTHENTICATED", message: "The bearer token's signature is not valid." });
      expect(shown(error)).not.toContain(token);
    }
    expect(r.verifications()).toBe(3);
    // The genuine token is still served from the cache.
    expect((await r.authenticator.authenticate(bearer(genuine))).tenant).toBe("acme");
    expect(r.verifications()).toBe(3);
  });

  it("never admits a token for another audience, though one with otherwise identical claims is cached", async () => {
    const r = await rig();
    const claims = r.claims({ jti: "same-jti" });
    await r.authenticator.authenticate(bearer(await sign(r.key, r.kid, claims)));
    const elsewhere = await sign(r.key, r.kid, { ...claims, aud: "another-service" });
    for (let i = 0; i < 2; i++)
      expect((await rejection(r.authenticator.authenticate(bearer(elsewhere)))).message).toMatch(/wrong audience/);
    expect(r.verifications()).toBe(3);
  });

  it("never caches a refusal: a token whose claims do not map is verified again each time", async () => {
    const r = await rig();
    const token = await sign(r.key, r.kid, r.claims({ tenant: ["acme", "other"] }));
    for (let i = 0; i < 3; i++)
      expect((await rejection(r.authenticator.authenticate(bearer(token)))).message).toMatch(
        /"tenant" claim is not a tenant name/,
      );
    expect(r.verifications()).toBe(3);
  });

  it("never caches an issuer failure: after a 503 the same token is verified, then cached", async () => {
    const r = await rig();
    const token = await sign(r.key, r.kid, r.claims());
    r.failNextKeyLookup();
    expect((await rejection(r.authenticator.authenticate(bearer(token)))).code).toBe("UNAVAILABLE");
    expect((await r.authenticator.authenticate(bearer(token))).tenant).toBe("acme");
    await r.authenticator.authenticate(bearer(token));
    expect(r.verifications()).toBe(2);
  });

  it("is bounded, and drops the least recently used token first", async () => {
    const r = await rig({ maxEntries: 3 });
    const [a, b, c, d] = await Promise.all(["a", "b", "c", "d"].map((sub) => sign(r.key, r.kid, r.claims({ sub }))));
    const use = async (token: string | undefined) => r.authenticator.authenticate(bearer(token as string));
    for (const token of [a, b, c]) await use(token);
    expect(r.verifications()).toBe(3);
    await use(a); // a hit: a becomes the most recently used
    expect(r.verifications()).toBe(3);
    await use(d); // a fourth entry: b, the least recently used, goes
    expect(r.verifications()).toBe(4);
    await use(a);
    await use(c);
    await use(d);
    expect(r.verifications()).toBe(4);
    await use(b);
    expect(r.verifications()).toBe(5);
  });

  it("hands each request its own Principal: changing one does not change the next", async () => {
    const r = await rig();
    const token = await sign(r.key, r.kid, r.claims());
    const first = await r.authenticator.authenticate(bearer(token));
    (first.domains as Set<string>).add("Setup: Tenants");
    const second = await r.authenticator.authenticate(bearer(token));
    expect(r.verifications()).toBe(1);
    expect([...second.domains]).toEqual(["Development"]);
  });

  it("verifies a token once however many requests bring it before its check ends (issue 50)", async () => {
    const r = await rig();
    const token = await sign(r.key, r.kid, r.claims());
    // A burst of one caller's connections, all read before the first check ends.
    const principals = await Promise.all(Array.from({ length: 50 }, () => r.authenticator.authenticate(bearer(token))));
    expect(r.verifications()).toBe(1);
    expect(new Set(principals.map((p) => p.tenant))).toEqual(new Set(["acme"]));
    // Each its own Principal all the same.
    expect(new Set(principals.map((p) => p.domains)).size).toBe(50);
    // A refusal is shared too, and cached by no one: the next request checks again.
    const expired = await sign(r.key, r.kid, r.claims({ exp: Math.floor(r.clock.ms / 1000) - 3600 }));
    const refusals = await Promise.all(
      Array.from({ length: 10 }, () => rejection(r.authenticator.authenticate(bearer(expired)))),
    );
    expect(new Set(refusals.map((e) => e.code))).toEqual(new Set(["UNAUTHENTICATED"]));
    expect(r.verifications()).toBe(2);
    await rejection(r.authenticator.authenticate(bearer(expired)));
    expect(r.verifications()).toBe(3);
  });
});

describe("the token cache itself", () => {
  it("keys by the SHA-256 of the whole token, never the token", () => {
    const token = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl";
    const key = tokenKey(token);
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(key).not.toContain(token.slice(0, 10));
    expect(tokenKey(`${token}x`)).not.toBe(key);
    expect(tokenKey(token)).toBe(key);
    // sha256sum's digest of the token, in base64url (printf %s <token> | sha256sum | xxd -r -p | base64).
    expect(key).toBe("OK3EEs9JO3VGVujvOBpDjfMb2QVgrzgcYQFE8skDF9E");
  });

  it("holds 10,000 entries by default, then drops the least recently used", () => {
    const clock = { ms: 0 };
    const cache = createTokenCache<number>({ now: () => clock.ms });
    for (let i = 0; i < TOKEN_CACHE_MAX_ENTRIES; i++) cache.set(tokenKey(`t${i}`), i);
    expect(cache.size).toBe(TOKEN_CACHE_MAX_ENTRIES);
    expect(cache.get(tokenKey("t0"))).toBe(0);
    cache.set(tokenKey("one more"), -1);
    expect(cache.size).toBe(TOKEN_CACHE_MAX_ENTRIES);
    expect(cache.get(tokenKey("t0"))).toBe(0);
    expect(cache.get(tokenKey("t1"))).toBeUndefined();
    expect(cache.get(tokenKey("one more"))).toBe(-1);
  });

  it("keeps no entry longer than 60 s, whatever it is asked", () => {
    const clock = { ms: 1_000_000 };
    const cache = createTokenCache<string>({ now: () => clock.ms, maxAgeMs: 3_600_000 });
    cache.set(tokenKey("t"), "v", { ttlMs: 3_600_000 });
    clock.ms += TOKEN_CACHE_MAX_AGE_MS - 1;
    expect(cache.get(tokenKey("t"))).toBe("v");
    clock.ms += 1;
    expect(cache.get(tokenKey("t"))).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it("keeps nothing whose deadline has passed already", () => {
    const clock = { ms: 1_000_000 };
    const cache = createTokenCache<string>({ now: () => clock.ms });
    cache.set(tokenKey("t"), "v", { notAfterMs: clock.ms });
    cache.set(tokenKey("u"), "v", { ttlMs: 0 });
    expect(cache.size).toBe(0);
  });
});

describe("the cache inside createAuthenticator, with an injected clock", () => {
  const client: TestClient = {
    clientId: "cache-user",
    clientSecret: "cache-user-secret-0123456789",
    tenant: "acme",
    domains: ["Development"],
  };
  let issuer: TestIssuer;
  beforeAll(async () => {
    issuer = await startOidcProvider([client]);
  });
  afterAll(() => issuer?.close());

  it(
    "local development issuer: a cached token is refused once past its exp; a forged twin or one for another " +
      "audience never",
    async () => {
      const store = memoryKeyStore();
      const clock = { ms: Date.now() };
      const { config } = parseAuthConfig({ AUTH_CLOCK_SKEW_SECONDS: "0" });
      const authenticator = await createAuthenticator(config, { keyStore: store, now: () => clock.ms });
      const jwk = JSON.parse(store.stored()) as JWK;
      const key = (await importJWK(jwk, "ES256")) as CryptoKey;
      const exp = Math.floor(clock.ms / 1000) + 30;
      const claims = { iss: LOCAL_ISSUER, aud: "asor", sub: "developer", tenant: "default", exp };
      const token = await sign(key, jwk.kid, claims);
      expect((await authenticator.authenticate(bearer(token))).tenant).toBe("default");
      const forged = tamper(token, (c) => {
        c.tenant = "other";
      });
      expect((await rejection(authenticator.authenticate(bearer(forged)))).message).toMatch(/signature is not valid/);
      const elsewhere = await sign(key, jwk.kid, { ...claims, aud: "another-service" });
      expect((await rejection(authenticator.authenticate(bearer(elsewhere)))).message).toMatch(/wrong audience/);
      clock.ms = exp * 1000 - 1;
      expect((await authenticator.authenticate(bearer(token))).tenant).toBe("default");
      clock.ms = exp * 1000;
      expect((await rejection(authenticator.authenticate(bearer(token)))).message).toBe(
        "The bearer token has expired.",
      );
    },
  );

  it("resource server: a cached token signed by the issuer is refused once past its exp", async () => {
    const clock = { ms: Date.now() };
    const { config, problems } = parseAuthConfig({
      AUTH_ISSUER: issuer.issuer,
      AUTH_ALLOW_HTTP_ISSUER: "true",
      AUTH_AUDIENCE: AUDIENCE,
      AUTH_CLOCK_SKEW_SECONDS: "0",
    });
    expect(problems).toEqual([]);
    const authenticator = await createAuthenticator(config, { now: () => clock.ms });
    // Signed with the issuer's own key, to expire within the cache's 60 s.
    const exp = Math.floor(clock.ms / 1000) + 30;
    const token = await sign(issuer.signingKey, issuer.kid, {
      iss: issuer.issuer,
      aud: AUDIENCE,
      sub: "cache-user",
      tenant: "acme",
      exp,
    });
    expect((await authenticator.authenticate(bearer(token))).tenant).toBe("acme");
    clock.ms = exp * 1000 - 1;
    expect((await authenticator.authenticate(bearer(token))).tenant).toBe("acme");
    clock.ms = exp * 1000;
    expect((await rejection(authenticator.authenticate(bearer(token)))).message).toBe("The bearer token has expired.");
  });
});
