import { randomBytes } from "node:crypto";
import { connect as createConnectionTo, createServer } from "node:net";
import type { AddressInfo, Server, Socket } from "node:net";
import { clone, create, equals } from "@bufbuild/protobuf";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { RegistryError } from "../../src/domain/errors.js";
import { openDatabase } from "../../src/storage/connection.js";
import type { Database } from "../../src/storage/connection.js";
import { createKnexRepository } from "../../src/storage/knex-repository.js";
import { migrateToLatest, migrateToNothing } from "../../src/storage/migrations/index.js";
import type { AgentDefinitionRepository, UpsertDecision, UpsertKey } from "../../src/storage/repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import type { FreshDatabase } from "../support/databases.js";

const tenant = "default";

function newId(): string {
  return randomBytes(16).toString("hex");
}

/** What a test varies; the rest is a valid definition. */
interface DefinitionFields {
  id?: string;
  name?: string;
  description?: string;
  version?: string;
  provider?: { id: string };
}

function definition(init: DefinitionFields = {}): AgentDefinition {
  return create(AgentDefinitionSchema, {
    name: "Expense Agent",
    description: "Files expense reports.",
    url: "https://agents.example.com/expense",
    version: "1.0.0",
    provider: { id: "Provider=Acme" },
    skills: [{ id: "file", name: "File", description: "Files one report." }],
    ...init,
  });
}

function keyOf(def: AgentDefinition): UpsertKey {
  return { name: def.name, providerId: def.provider?.id ?? "", version: def.version };
}

/** The decision the domain makes in its simplest form: keep an existing id, else take a new one. */
function keepOrAssign(def: AgentDefinition): UpsertDecision {
  return (existing) => withId(def, existing?.id ?? newId());
}

function withId(def: AgentDefinition, id: string): AgentDefinition {
  const copy = clone(AgentDefinitionSchema, def);
  copy.id = id;
  return copy;
}

function upsert(repo: AgentDefinitionRepository, def: AgentDefinition, into = tenant) {
  return repo.upsert(into, keyOf(def), keepOrAssign(def));
}

function sleep(millis: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, millis));
}

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  /** A second, direct connection to look at what is really stored. */
  let raw: Database;

  beforeAll(async () => {
    repo = await createKnexRepository(target());
    raw = await openDatabase(target());
    await raw.db("tenants").insert({ name: "other" });
  });

  afterAll(async () => {
    await repo?.close();
    await raw?.db.destroy();
  });

  async function rowCount(): Promise<number> {
    const row = (await raw.db("agent_definitions").count({ n: "*" }).first()) as { n: number | string };
    return Number(row.n);
  }

  it("runs its migrations again on start without changing anything", async () => {
    const before = await rowCount();
    const again = await createKnexRepository(target());
    try {
      expect(await again.tenantExists("default")).toBe(true);
      const tenants = (await raw.db("tenants").where({ name: "default" }).count({ n: "*" }).first()) as { n: number | string };
      expect(Number(tenants.n)).toBe(1);
      const applied = await raw.db("knex_migrations").select("name").orderBy("id");
      expect(applied.map((m: { name: string }) => m.name)).toEqual([
        "0001-create-tenants",
        "0002-seed-default-tenant",
        "0003-create-agent-definitions",
      ]);
    } finally {
      await again.close();
    }
    expect(await rowCount()).toBe(before);
  });

  it("knows the seeded default tenant and no others it was not given", async () => {
    expect(await repo.tenantExists("default")).toBe(true);
    expect(await repo.tenantExists("Default")).toBe(false);
    expect(await repo.tenantExists("nope")).toBe(false);
  });

  it("creates an instance, then updates it in place under the same key", async () => {
    const first = definition({ name: "In place", description: "first" });
    const created = await upsert(repo, first);
    expect(created.created).toBe(true);
    expect(created.record.id).toMatch(/^[0-9a-f]{32}$/);
    expect(created.record.definition.id).toBe(created.record.id);

    await sleep(5);
    const second = definition({ name: "In place", description: "second" });
    const updated = await upsert(repo, second);
    expect(updated.created).toBe(false);
    expect(updated.record.id).toBe(created.record.id);
    expect(updated.record.definition.description).toBe("second");

    const stored = await repo.get(tenant, created.record.id);
    expect(stored?.definition.description).toBe("second");
    expect(stored?.createdAt.getTime()).toBe(created.record.createdAt.getTime());
    expect(stored?.updatedAt.getTime()).toBeGreaterThan(created.record.updatedAt.getTime());
    expect(stored?.updatedAt.getTime()).toBe(updated.record.updatedAt.getTime());
    const rows = await raw.db("agent_definitions").where({ tenant, name: "In place" });
    expect(rows).toHaveLength(1);
  });

  it("hands decide() the existing record, and nothing when the key is new", async () => {
    const def = definition({ name: "Decide sees" });
    const seen: Array<string | undefined> = [];
    const decide: UpsertDecision = (existing) => {
      seen.push(existing?.id);
      return withId(def, existing?.id ?? newId());
    };
    const created = await repo.upsert(tenant, keyOf(def), decide);
    await repo.upsert(tenant, keyOf(def), decide);
    expect(seen).toEqual([undefined, created.record.id]);
  });

  it("compares the key exactly: case and trailing spaces make different keys", async () => {
    const names = ["Exact", "exact", "Exact ", "EXACT"];
    const ids = new Set<string>();
    for (const name of names) {
      const result = await upsert(repo, definition({ name }));
      expect(result.created).toBe(true);
      ids.add(result.record.id);
    }
    expect(ids.size).toBe(names.length);
    const versions = await Promise.all(["1.0.0", "1.0.0 ", "1.0.0\t"].map((version) => upsert(repo, definition({ name: "Exact v", version }))));
    expect(versions.map((r) => r.created)).toEqual([true, true, true]);
    const providers = await Promise.all(["Provider=Acme", "provider=acme"].map((id) => upsert(repo, definition({ name: "Exact p", provider: { id } }))));
    expect(providers.map((r) => r.created)).toEqual([true, true]);
  });

  it("scopes the key by tenant: the same key in another tenant is another instance", async () => {
    const def = definition({ name: "Per tenant" });
    const here = await upsert(repo, def);
    const there = await upsert(repo, def, "other");
    expect(there.created).toBe(true);
    expect(there.record.id).not.toBe(here.record.id);
    expect(await repo.get("other", here.record.id)).toBeUndefined();
    expect((await repo.get(tenant, here.record.id))?.tenant).toBe(tenant);
  });

  it("rejects an unknown tenant with TENANT_NOT_FOUND and writes nothing", async () => {
    const before = await rowCount();
    let decided = false;
    const attempt = repo.upsert("nope", keyOf(definition()), (existing) => {
      decided = true;
      return withId(definition(), existing?.id ?? newId());
    });
    await expect(attempt).rejects.toBeInstanceOf(RegistryError);
    await expect(attempt).rejects.toMatchObject({ code: "TENANT_NOT_FOUND", kind: "not_found" });
    expect(decided).toBe(false);
    expect(await rowCount()).toBe(before);
  });

  it("leaves nothing written when decide() throws, and passes its error through", async () => {
    const before = await rowCount();
    const refusal = new RegistryError("invalid", "A3015", "clash");
    await expect(repo.upsert(tenant, keyOf(definition({ name: "Refused" })), () => Promise.reject(refusal))).rejects.toBe(refusal);
    expect(await rowCount()).toBe(before);
  });

  it("rolls back an insert that fails inside the transaction (an id already taken) and reports CONFLICT", async () => {
    const taken = await upsert(repo, definition({ name: "Holder of the id", description: "holder" }));
    const before = await rowCount();
    let attempts = 0;
    const collide: UpsertDecision = () => {
      attempts++;
      return definition({ name: "Id thief", id: taken.record.id });
    };
    const attempt = repo.upsert(tenant, keyOf(definition({ name: "Id thief" })), collide);
    await expect(attempt).rejects.toMatchObject({ code: "CONFLICT", kind: "conflict" });
    expect(attempts).toBeGreaterThan(1); // a duplicate key is retried before giving up
    expect(await rowCount()).toBe(before);
    expect(await raw.db("agent_definitions").where({ tenant, name: "Id thief" })).toHaveLength(0);
    expect((await repo.get(tenant, taken.record.id))?.definition.description).toBe("holder");
  });

  it("refuses a decision that would change the id of an existing instance, keeping the stored one", async () => {
    const original = await upsert(repo, definition({ name: "Stable id", description: "original" }));
    await expect(repo.upsert(tenant, keyOf(original.record.definition), () => definition({ name: "Stable id", id: newId(), description: "moved" }))).rejects.toThrow(/existing instance/);
    const stored = await repo.get(tenant, original.record.id);
    expect(stored?.definition.description).toBe("original");
  });

  it("answers undefined for an id it does not hold, including malformed ones", async () => {
    expect(await repo.get(tenant, newId())).toBeUndefined();
    expect(await repo.get(tenant, "not-an-id")).toBeUndefined();
    expect(await repo.get(tenant, "🤖".repeat(16))).toBeUndefined();
    expect(await repo.get("nope", newId())).toBeUndefined();
  });

  it("stores 4-byte unicode verbatim, in keys and in the document", async () => {
    const fields = {
      name: "Agent 🤖 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
      description: "Emoji 😀👍🏽 and CJK 漢字 and combining é (e + U+0301)",
      provider: { id: "Provider=Ünïcødé 🏭" },
    };
    const def = definition(fields);
    const created = await upsert(repo, def);
    const stored = await repo.get(tenant, created.record.id);
    expect(stored?.definition.name).toBe(def.name);
    expect(stored?.definition.description).toBe(def.description);
    expect(stored?.definition.provider?.id).toBe(def.provider?.id);
    expect(equals(AgentDefinitionSchema, stored!.definition, created.record.definition)).toBe(true);
    // A different emoji is a different key, not a collation-equal one.
    const other = await upsert(repo, definition({ ...fields, name: fields.name.replace("🤖", "👾") }));
    expect(other.created).toBe(true);
  });

  it("ends with one instance when many upserts race on one key, and every call succeeds", async () => {
    const def = definition({ name: "Raced" });
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => upsert(repo, definition({ name: "Raced", description: `writer ${i}` }))));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.record.id)).size).toBe(1);
    const rows = await raw.db("agent_definitions").where({ tenant, name: def.name });
    expect(rows).toHaveLength(1);
  });

  it("ends with one instance when two repositories (as two processes would) race on one key", async () => {
    const second = await createKnexRepository(target());
    try {
      const writers = Array.from({ length: 10 }, (_, i) => upsert(i % 2 === 0 ? repo : second, definition({ name: "Raced twice", description: `writer ${i}` })));
      const results = await Promise.all(writers);
      expect(results.filter((r) => r.created)).toHaveLength(1);
      expect(await raw.db("agent_definitions").where({ tenant, name: "Raced twice" })).toHaveLength(1);
    } finally {
      await second.close();
    }
  });

  describe("listing", () => {
    const listed = "listed";

    beforeAll(async () => {
      await raw.db("tenants").insert({ name: listed });
      for (let i = 0; i < 7; i++) await upsert(repo, definition({ name: `Listed ${i}` }), listed);
      // Updating one must not move it in the order.
      await upsert(repo, definition({ name: "Listed 2", description: "updated" }), listed);
    });

    it("pages the tenant's definitions oldest first with the total of all of them", async () => {
      const first = await repo.list(listed, { limit: 3, offset: 0 });
      const second = await repo.list(listed, { limit: 3, offset: 3 });
      const third = await repo.list(listed, { limit: 3, offset: 6 });
      expect([first.total, second.total, third.total]).toEqual([7, 7, 7]);
      const names = [...first.items, ...second.items, ...third.items].map((r) => r.definition.name);
      expect(names).toEqual(Array.from({ length: 7 }, (_, i) => `Listed ${i}`));
      expect(first.items[2]?.definition.description).toBe("updated");
    });

    it("answers the same order every time", async () => {
      const a = await repo.list(listed, { limit: 100, offset: 0 });
      const b = await repo.list(listed, { limit: 100, offset: 0 });
      expect(b.items.map((r) => r.id)).toEqual(a.items.map((r) => r.id));
    });

    it("answers an empty page past the end, and for limit 0, with the total", async () => {
      expect(await repo.list(listed, { limit: 10, offset: 50 })).toEqual({ total: 7, items: [] });
      expect(await repo.list(listed, { limit: 0, offset: 0 })).toEqual({ total: 7, items: [] });
    });

    it("lists only the tenant's own definitions", async () => {
      const empty = await repo.list("nope", { limit: 10, offset: 0 });
      expect(empty).toEqual({ total: 0, items: [] });
      const page = await repo.list(listed, { limit: 100, offset: 0 });
      expect(page.items.every((r) => r.tenant === listed)).toBe(true);
    });
  });

  describe("migrations", () => {
    const own = useFreshDatabase(db);

    it("roll all the way back and forward again", async () => {
      const first = await createKnexRepository(own());
      await first.close();
      const direct = await openDatabase(own());
      try {
        await migrateToNothing(direct.db);
        expect(await direct.db.schema.hasTable("agent_definitions")).toBe(false);
        expect(await direct.db.schema.hasTable("tenants")).toBe(false);
        await migrateToLatest(direct.db);
        expect(await direct.db.schema.hasTable("agent_definitions")).toBe(true);
        const again = await createKnexRepository(own());
        expect(await again.tenantExists("default")).toBe(true);
        await again.close();
      } finally {
        await direct.db.destroy();
      }
    });
  });

  if (db.name === "mariadb") {
    describe("when the connection drops", () => {
      let proxy: Server;
      const sockets = new Set<Socket>();
      let fresh: FreshDatabase;

      beforeAll(() => {
        fresh = target();
      });

      afterEach(() => {
        for (const socket of sockets) socket.destroy();
      });

      it("reports UNAVAILABLE, not a driver error, once the server is gone", async () => {
        const server = new URL(fresh.databaseUrl!);
        proxy = createServer((client) => {
          const upstream = createConnectionTo(Number(server.port || 3306), server.hostname);
          sockets.add(client).add(upstream);
          client.pipe(upstream).pipe(client);
          client.on("error", () => upstream.destroy());
          upstream.on("error", () => client.destroy());
        });
        await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
        const viaProxy = new URL(fresh.databaseUrl!);
        viaProxy.port = String((proxy.address() as AddressInfo).port);
        const flaky = await createKnexRepository({ databaseUrl: viaProxy.toString(), dataDir: fresh.dataDir });
        try {
          expect(await flaky.tenantExists(tenant)).toBe(true);
          await new Promise<void>((resolve) => {
            proxy.close(() => resolve());
            for (const socket of sockets) socket.destroy();
          });
          await expect(flaky.get(tenant, newId())).rejects.toMatchObject({ code: "UNAVAILABLE" });
          await expect(flaky.list(tenant, { limit: 1, offset: 0 })).rejects.toMatchObject({ code: "UNAVAILABLE" });
          await expect(upsert(flaky, definition({ name: "Unreachable" }))).rejects.toMatchObject({ code: "UNAVAILABLE" });
        } finally {
          await flaky.close();
        }
      });
    });
  }
});

describe("an unreachable MySQL server", () => {
  it("fails the start with UNAVAILABLE, not a raw driver error", async () => {
    const attempt = createKnexRepository({ databaseUrl: "mysql://root@127.0.0.1:1/asor", dataDir: "/nonexistent-unused" });
    await expect(attempt).rejects.toBeInstanceOf(RegistryError);
    await expect(attempt).rejects.toMatchObject({ code: "UNAVAILABLE", kind: "unavailable" });
  });
});

