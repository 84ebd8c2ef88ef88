// The issuer's keys: fetched once and cached, fetched again when a token names
// a kid the cache does not know (key rotation), but not more often than the
// cooldown allows; an unreachable JWKS is a 503, not a 401. Against a tiny
// JWKS server on loopback.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type CryptoKey, calculateJwkThumbprint, exportJWK, type JWK } from "jose";
import { afterEach, describe, expect, it } from "vitest";
import { createJwtVerifier, remoteKeys } from "../../src/auth/jwt-verifier.js";
import { newKey, now, rejection, shown, sign } from "./forge.js";

const ISSUER = "https://issuer.test";

interface JwksServer {
  readonly url: URL;
  keys: JWK[];
  fetches: number;
  close(): Promise<void>;
}

const servers: JwksServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function jwksServer(): Promise<JwksServer> {
  const server: Server = createServer((_request, response) => {
    state.fetches += 1;
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: state.keys }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const state: JwksServer = {
    url: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`),
    keys: [],
    fetches: 0,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  servers.push(state);
  return state;
}

async function signingKey(): Promise<{ privateKey: CryptoKey; kid: string; jwk: JWK }> {
  const { privateKey, publicKey } = await newKey();
  const jwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(jwk);
  return { privateKey, kid, jwk: { ...jwk, kid, alg: "ES256", use: "sig" } };
}

const claims = () => ({ iss: ISSUER, aud: "asor", sub: "svc", iat: now(), exp: now() + 300 });
const verifierFor = (url: URL, cooldownMs: number) =>
  createJwtVerifier({
    issuer: ISSUER,
    audience: "asor",
    algorithms: ["ES256"],
    clockSkewSeconds: 30,
    keys: remoteKeys(url, { cooldownMs }),
  });

describe("the issuer's key set", () => {
  it("caches the keys: many tokens, one fetch", async () => {
    const jwks = await jwksServer();
    const key = await signingKey();
    jwks.keys = [key.jwk];
    const verifier = verifierFor(jwks.url, 60_000);
    for (let i = 0; i < 5; i++) await verifier.verify(await sign(key.privateKey, key.kid, claims()));
    expect(jwks.fetches).toBe(1);
  });

  it("accepts a token signed with a key published after the keys were cached (refetch on unknown kid)", async () => {
    const jwks = await jwksServer();
    const oldKey = await signingKey();
    const rotated = await signingKey();
    jwks.keys = [oldKey.jwk];
    const verifier = verifierFor(jwks.url, 50);
    await verifier.verify(await sign(oldKey.privateKey, oldKey.kid, claims()));
    jwks.keys = [rotated.jwk, oldKey.jwk];
    await new Promise((resolve) => setTimeout(resolve, 80));
    const payload = await verifier.verify(await sign(rotated.privateKey, rotated.kid, claims()));
    expect(payload.sub).toBe("svc");
    expect(jwks.fetches).toBe(2);
  });

  it("does not refetch for an unknown kid within the cooldown", async () => {
    const jwks = await jwksServer();
    const known = await signingKey();
    const unknown = await signingKey();
    jwks.keys = [known.jwk];
    const verifier = verifierFor(jwks.url, 60_000);
    await verifier.verify(await sign(known.privateKey, known.kid, claims()));
    const token = await sign(unknown.privateKey, unknown.kid, claims());
    for (let i = 0; i < 3; i++) {
      const error = await rejection(verifier.verify(token));
      expect(error.message).toBe("The bearer token is signed with a key the issuer has not published.");
    }
    expect(jwks.fetches).toBe(1);
  });

  it("answers 503 (issuer unavailable), not 401, when the key set cannot be fetched", async () => {
    const jwks = await jwksServer();
    const url = jwks.url;
    await jwks.close();
    servers.length = 0;
    const key = await signingKey();
    const token = await sign(key.privateKey, key.kid, claims());
    const error = await rejection(verifierFor(url, 50).verify(token));
    expect(error).toMatchObject({ code: "UNAVAILABLE" });
    expect(shown(error)).not.toContain(token);
  });
});
