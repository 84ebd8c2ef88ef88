import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentDefinitionRepository, KeyToHold, TenantAdminStore } from "../../src/storage/repository.js";
import type { Database } from "../../src/storage/run/connection.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";

/** A key as the service hands it over (its JWK's text stands for the key: storage compares it, never parses it). */
const key = (kid: string, material = "m1"): KeyToHold => ({
  kid,
  alg: "EdDSA",
  jwk: JSON.stringify({ alg: "EdDSA", crv: "Ed25519", kid, kty: "OKP", use: "sig", x: material }),
});

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  let store: TenantAdminStore;
  let raw: Database;

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    store = repo.tenantAdmin();
    raw = await openDatabase(target());
    await repo.createTenant("acme", "ACME-");
    await repo.createTenant("globex", null);
  });
  afterAll(async () => {
    await repo?.close();
    await raw?.db.destroy();
  });

  const active = (keys: readonly { kid: string; revokedAt: Date | null }[]) =>
    keys.filter((k) => k.revokedAt === null).map((k) => k.kid);
  const revoked = (keys: readonly { kid: string; revokedAt: Date | null }[]) =>
    keys.filter((k) => k.revokedAt !== null).map((k) => k.kid);

  describe("provider keys", () => {
    it("replaces the set: keys kept stay as they were, new ones are added, the others revoked and kept", async () => {
      const first = await store.setProviderKeys("acme", "Provider=p1", [key("a"), key("b")]);
      expect(active(first.keys)).toEqual(["a", "b"]);
      expect(first.revoked).toEqual([]);
      const createdA = first.keys.find((k) => k.kid === "a")?.createdAt;
      const second = await store.setProviderKeys("acme", "Provider=p1", [key("a"), key("c")]);
      expect(active(second.keys)).toEqual(["a", "c"]);
      expect(revoked(second.keys)).toEqual(["b"]);
      expect(second.revoked).toEqual(["b"]);
      expect(second.keys.find((k) => k.kid === "a")?.createdAt).toEqual(createdA);
      const rows = await raw
        .db("provider_keys")
        .where({ tenant: "acme", provider_id: "Provider=p1" })
        .count({ n: "*" });
      expect(Number(rows[0]?.n)).toBe(3);
      // The same set again changes nothing.
      const again = await store.setProviderKeys("acme", "Provider=p1", [key("c"), key("a")]);
      expect(again.revoked).toEqual([]);
      expect(again.keys).toEqual(second.keys);
    });

    it("refuses a revoked kid (same key or not) and a held kid naming another key; writes nothing", async () => {
      await store.setProviderKeys("acme", "Provider=p2", [key("old"), key("kept")]);
      await store.setProviderKeys("acme", "Provider=p2", [key("kept")]);
      const before = await store.providerKeys("acme", "Provider=p2");
      const refused = store.setProviderKeys("acme", "Provider=p2", [key("new"), key("old"), key("kept", "m2")]);
      await expect(refused).rejects.toMatchObject({
        code: "VALIDATION_FAILED",
        issues: [
          { code: "KID_REVOKED", path: "keys[1].kid", field: "kid" },
          { code: "KID_TAKEN", path: "keys[2].kid", field: "kid" },
        ],
      });
      await expect(store.setProviderKeys("acme", "Provider=p2", [key("old", "m9")])).rejects.toMatchObject({
        issues: [{ code: "KID_REVOKED" }],
      });
      expect(await store.providerKeys("acme", "Provider=p2")).toEqual(before);
    });

    it("revokes one key and keeps it; a revoked one again changes nothing; a kid never held: NOT_FOUND", async () => {
      await store.setProviderKeys("acme", "Provider=p3", [key("x"), key("y")]);
      const change = await store.revokeProviderKey("acme", "Provider=p3", "x");
      expect(change.revoked).toEqual(["x"]);
      expect(active(change.keys)).toEqual(["y"]);
      const revokedAt = change.keys.find((k) => k.kid === "x")?.revokedAt;
      expect(revokedAt).toBeInstanceOf(Date);
      const again = await store.revokeProviderKey("acme", "Provider=p3", "x");
      expect(again.revoked).toEqual([]);
      expect(again.keys.find((k) => k.kid === "x")?.revokedAt).toEqual(revokedAt);
      await expect(store.revokeProviderKey("acme", "Provider=p3", "z")).rejects.toMatchObject({
        code: "NOT_FOUND",
        issues: [{ path: "kid" }],
      });
    });

    it("finds one key by kid, active or revoked, for the verification to come", async () => {
      await store.setProviderKeys("acme", "Provider=p4", [key("k1"), key("k2")]);
      await store.revokeProviderKey("acme", "Provider=p4", "k2");
      expect(await store.providerKey("acme", "Provider=p4", "k1")).toMatchObject({ kid: "k1", revokedAt: null });
      expect((await store.providerKey("acme", "Provider=p4", "k2"))?.revokedAt).toBeInstanceOf(Date);
      expect(await store.providerKey("acme", "Provider=p4", "k3")).toBeUndefined();
      expect(await store.providerKey("globex", "Provider=p4", "k1")).toBeUndefined();
    });

    it("keeps the same provider's keys apart per tenant, and names a tenant that was never set up", async () => {
      await store.setProviderKeys("acme", "Provider=shared", [key("one")]);
      await store.setProviderKeys("globex", "Provider=shared", [key("two", "other")]);
      expect(active(await store.providerKeys("acme", "Provider=shared"))).toEqual(["one"]);
      expect(active(await store.providerKeys("globex", "Provider=shared"))).toEqual(["two"]);
      await store.setProviderKeys("globex", "Provider=shared", []);
      expect(active(await store.providerKeys("acme", "Provider=shared"))).toEqual(["one"]);
      await expect(store.setProviderKeys("nope", "Provider=shared", [key("a")])).rejects.toMatchObject({
        code: "TENANT_NOT_FOUND",
      });
      await expect(store.providerKeys("nope", "Provider=shared")).rejects.toMatchObject({ code: "TENANT_NOT_FOUND" });
    });

    it("orders concurrent replacements of one provider's set: each ends, one set wins whole", async () => {
      // Without the set's row (migration 0019) first sets raced on MariaDB: all keys of both ended active.
      for (const round of [1, 2, 3, 4]) {
        const provider = `Provider=race${round}`;
        const sets = [0, 1, 2].map((s) => [key(`r${s}a`), key(`r${s}b`)]);
        await Promise.all(sets.map((set) => store.setProviderKeys("acme", provider, set)));
        const keys = await store.providerKeys("acme", provider);
        expect(sets.map((set) => set.map((k) => k.kid))).toContainEqual(active(keys));
        expect(revoked(keys)).toHaveLength(4);
        const [row] = await raw.db("provider_key_sets").where({ tenant: "acme", provider_id: provider });
        expect(Number(row?.changes)).toBe(3);
      }
    });
  });

  describe("tenant settings", () => {
    it("starts every tenant at the defaults without a row, and sets what a change names", async () => {
      expect(await store.settings("acme")).toEqual({ signatures: "OPTIONAL", discovery: "TOKEN" });
      expect(await store.allSettings()).toEqual(new Map());
      expect(await store.updateSettings("acme", {})).toEqual({ signatures: "OPTIONAL", discovery: "TOKEN" });
      expect(await store.updateSettings("acme", { signatures: "REQUIRED" })).toEqual({
        signatures: "REQUIRED",
        discovery: "TOKEN",
      });
      expect(await store.settings("acme")).toEqual({ signatures: "REQUIRED", discovery: "TOKEN" });
      expect(await store.settings("globex")).toEqual({ signatures: "OPTIONAL", discovery: "TOKEN" });
      await store.updateSettings("acme", { signatures: "REQUIRED_FOR_KEYED_PROVIDERS" });
      expect(await store.allSettings()).toEqual(
        new Map([["acme", { signatures: "REQUIRED_FOR_KEYED_PROVIDERS", discovery: "TOKEN" }]]),
      );
      // One setting changed leaves the others as they were.
      expect(await store.updateSettings("acme", { discovery: "PUBLIC" })).toEqual({
        signatures: "REQUIRED_FOR_KEYED_PROVIDERS",
        discovery: "PUBLIC",
      });
      await expect(store.settings("nope")).rejects.toMatchObject({ code: "TENANT_NOT_FOUND" });
      await expect(store.updateSettings("nope", { signatures: "REQUIRED" })).rejects.toMatchObject({
        code: "TENANT_NOT_FOUND",
      });
    });

    it("holds only the values a setting allows (the column's CHECK)", async () => {
      const insert = raw
        .db("tenant_settings")
        .insert({ tenant: "globex", signatures: "MAYBE", updated_at: "2026-01-01 00:00:00.000" });
      await expect(insert).rejects.toThrow();
      const discovery = raw
        .db("tenant_settings")
        .insert({ tenant: "globex", discovery: "OPEN", updated_at: "2026-01-01 00:00:00.000" });
      await expect(discovery).rejects.toThrow();
    });
  });
});
