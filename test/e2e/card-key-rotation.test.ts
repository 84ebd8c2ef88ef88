/**
 * Issue 43, item 1: rotating the card signing key (CARD_SIGNING_KEYS_DIR, each key's `nbf`). A new key is
 * published before it signs; from its `nbf` it signs the cards; a card signed before still verifies during the
 * overlap (CARD_SIGNING_KEY_OVERLAP_SECONDS); after it the old key is gone from the JWKS.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeProtectedHeader, exportJWK, generateKeyPair } from "jose";
import { afterAll, beforeAll, expect, it } from "vitest";
import { parseConfig } from "../../src/config.js";
import { cardSigningKeyFiles } from "../../src/main/card-signing-key-files.js";
import { type Card, jwksKeys, verifiesWithA2a } from "../support/card-signatures.js";
import { type FreshDatabase, forEachDatabase } from "../support/databases.js";
import { exampleDefinition } from "../support/definitions.js";
import { startServer } from "../support/server.js";

const T = "/api/asor/v1/default/agentDefinition";
const OVERLAP_SECONDS = 2;
/** How long after the start the second key signs, in seconds. */
const ROTATION_AFTER_SECONDS = 3;

const sleepUntil = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms - Date.now())));

async function privateJwk(alg: "ES256" | "EdDSA", kid: string, nbf?: number) {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  return { ...(await exportJWK(privateKey)), kid, ...(alg === "EdDSA" ? { alg } : {}), ...(nbf ? { nbf } : {}) };
}

forEachDatabase((db) => {
  let keysDir = "";
  let database: FreshDatabase | undefined;
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  /** When the second key signs from (ms). */
  let rotationMs = 0;

  beforeAll(async () => {
    keysDir = await mkdtemp(join(tmpdir(), "card-keys-"));
    const nbf = Math.ceil(Date.now() / 1000) + ROTATION_AFTER_SECONDS;
    rotationMs = nbf * 1000;
    await writeFile(join(keysDir, "a.jwk"), JSON.stringify(await privateJwk("ES256", "old-key")), { mode: 0o600 });
    await writeFile(join(keysDir, "b.jwk"), JSON.stringify(await privateJwk("EdDSA", "new-key", nbf)), {
      mode: 0o600,
    });
    // A file of another kind in the directory is not a key.
    await writeFile(join(keysDir, "README.txt"), "keys of the registry");
    database = await db.create();
    server = await startServer(database, {
      CARD_SIGNING_KEYS_DIR: keysDir,
      CARD_SIGNING_KEY_OVERLAP_SECONDS: String(OVERLAP_SECONDS),
    });
  });
  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
    await rm(keysDir, { recursive: true, force: true });
  });

  it("signs with the old key until the new one's nbf, then the new; the old goes after the overlap", async () => {
    const { baseUrl, authorization } = server!;
    const posted = await fetch(`${baseUrl}${T}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization },
      body: JSON.stringify({ ...exampleDefinition(), name: "Rotated Agent", externalAgentID: "ext-rotated" }),
    });
    const { id } = (await posted.json()) as { id: string };
    const card = async () =>
      (await (await fetch(`${baseUrl}${T}/${id}/agentCard`, { headers: { authorization } })).json()) as Card;
    const kidOf = (c: Card) => decodeProtectedHeader(c.signatures![0] as never).kid;

    // Before the rotation: the new key is published already, the old one signs.
    expect((await jwksKeys(baseUrl)).map((k) => k.kid)).toEqual(["old-key", "new-key"]);
    const before = await card();
    expect(Date.now()).toBeLessThan(rotationMs);
    expect(kidOf(before)).toBe("old-key");
    expect(await verifiesWithA2a(baseUrl, before)).toBe(true);

    // After the new key's nbf: the same revision is signed anew by it; the old card still verifies.
    await sleepUntil(rotationMs + 100);
    const after = await card();
    expect(kidOf(after)).toBe("new-key");
    expect(decodeProtectedHeader(after.signatures![0] as never).alg).toBe("EdDSA");
    expect(await verifiesWithA2a(baseUrl, after)).toBe(true);
    expect(await verifiesWithA2a(baseUrl, before)).toBe(true);
    const during = await fetch(`${baseUrl}/.well-known/jwks.json`);
    const maxAge = Number(during.headers.get("cache-control")?.match(/max-age=(\d+)/)?.[1]);
    expect(maxAge).toBeLessThanOrEqual(OVERLAP_SECONDS);

    // After the overlap: the old key is gone, and a card it signed no longer verifies.
    await sleepUntil(rotationMs + OVERLAP_SECONDS * 1000 + 100);
    expect((await jwksKeys(baseUrl)).map((k) => k.kid)).toEqual(["new-key"]);
    expect(await verifiesWithA2a(baseUrl, before)).toBe(false);
    expect(await verifiesWithA2a(baseUrl, await card())).toBe(true);
  }, 30_000);

  it("refuses to start on a bad key, naming the file and what is wrong", async () => {
    const bad = await mkdtemp(join(tmpdir(), "card-keys-"));
    try {
      await writeFile(join(bad, "one.jwk"), JSON.stringify({ kty: "EC", crv: "P-256", x: "x", y: "y", d: "d" }));
      await writeFile(join(bad, "two.json"), JSON.stringify({ kty: "oct", k: "c2VjcmV0", kid: "hmac", alg: "HS256" }));
      await writeFile(join(bad, "three.jwk"), "not json");
      const later = await privateJwk("ES256", "later", Math.ceil(Date.now() / 1000) + 3600);
      await writeFile(join(bad, "alone.jwk"), JSON.stringify(later));
      await expect(
        cardSigningKeyFiles(parseConfig({ CARD_SIGNING_KEY_FILE: join(bad, "alone.jwk") }))(),
      ).rejects.toThrow(/none is active yet \(the first, "later", from nbf \d+\)/);
      const config = parseConfig({ CARD_SIGNING_KEYS_DIR: bad, DATA_DIR: bad });
      await expect(cardSigningKeyFiles(config)()).rejects.toThrow(
        new RegExp(
          [`${bad}/one.jwk: has no kid`, `${bad}/three.jwk: is not a JSON object`, `${bad}/two.json: alg "HS256"`]
            .map((s) => s.replaceAll("/", "\\/"))
            .join("[^]*"),
        ),
      );
    } finally {
      await rm(bad, { recursive: true, force: true });
    }
  });
});
