import type { AddressInfo, Server, Socket } from "node:net";
import { connect as createConnectionTo, createServer } from "node:net";
import { equals, toBinary } from "@bufbuild/protobuf";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { RegistryError } from "../../src/domain/errors.js";
import { unfilteredQuery } from "../../src/domain/list-query.js";
import { migrateToLatest, migrateToNothing } from "../../src/storage/migrations/index.js";
import type {
  AgentDefinitionRepository,
  AgentRef,
  StoredDefinition,
  WriteTransaction,
} from "../../src/storage/repository.js";
import { defaultSequencePrefix, defaultTenant } from "../../src/storage/repository.js";
import type { Database } from "../../src/storage/run/connection.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import type { FreshDatabase } from "../support/databases.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { bytes, definition, fromBinaryBytes, fromJsonBytes, keyOf, newId, save, sleep, withIds } from "./fixtures.js";

const tenant = "default";

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  /** A second, direct connection to look at what is really stored. */
  let raw: Database;

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    raw = await openDatabase(target());
    await repo.createTenant("other", "OTHER-");
  });

  afterAll(async () => {
    await repo?.close();
    await raw?.db.destroy();
  });

  async function count(table: string, where: Record<string, unknown> = {}): Promise<number> {
    const row = (await raw.db(table).where(where).count({ n: "*" }).first()) as { n: number | string };
    return Number(row.n);
  }

  it("runs its migrations again on start without changing anything", async () => {
    const before = await count("agent_definitions");
    const again = await createSqlRepository(target());
    try {
      // The runtime's copy of the default tenant is the one migration 0002 seeded.
      expect((await again.getTenant(defaultTenant))?.sequencePrefix).toBe(defaultSequencePrefix);
      expect(await count("tenants", { name: defaultTenant })).toBe(1);
      const applied = await raw.db("knex_migrations").select("name").orderBy("id");
      expect(applied.map((m: { name: string }) => m.name)).toEqual([
        "0001-create-tenants",
        "0002-seed-default-tenant",
        "0003-create-agents",
        "0004-create-agent-external-ids",
        "0005-create-agent-definitions",
        "0006-add-definition-binary",
        "0007-reencode-empty-lists",
        "0008-add-definition-lifecycle",
        "0009-add-search-index",
        "0010-add-term-counts",
        "0011-add-document-bytes",
        "0012-add-agent-lock-count",
        "0013-add-word-terms",
        "0014-allow-unnumbered-definitions",
        "0015-add-revisions",
        "0016-add-text-revision",
        "0017-add-term-versions",
        "0018-create-provider-keys",
        "0019-create-provider-key-sets",
        "0020-create-tenant-settings",
        "0021-add-definition-liveness",
      ]);
    } finally {
      await again.close();
    }
    expect(await count("agent_definitions")).toBe(before);
  });

  describe("tenants", () => {
    it("starts with the default tenant, which has a sequence generator", async () => {
      const seeded = await repo.getTenant("default");
      expect(seeded).toMatchObject({ name: "default", sequencePrefix: "AGENT-" });
      expect(seeded?.createdAt).toBeInstanceOf(Date);
      expect(Number.isNaN(seeded?.createdAt.getTime())).toBe(false);
      expect(await repo.getTenant("Default")).toBeUndefined();
      expect(await repo.getTenant("nope")).toBeUndefined();
    });

    it("creates tenants with and without a sequence generator", async () => {
      const withPrefix = await repo.createTenant("acme", "ACME-");
      expect(withPrefix).toMatchObject({ name: "acme", sequencePrefix: "ACME-", nextAgentNumber: 1 });
      const without = await repo.createTenant("bare", null);
      expect(without).toMatchObject({ name: "bare", sequencePrefix: null, nextAgentNumber: 1 });
      expect(await repo.getTenant("acme")).toEqual(withPrefix);
      expect(await repo.getTenant("bare")).toEqual(without);
    });

    it("refuses a tenant that exists with TENANT_EXISTS, keeping the stored one", async () => {
      await repo.createTenant("twice", "ONE-");
      const again = repo.createTenant("twice", "TWO-");
      await expect(again).rejects.toBeInstanceOf(RegistryError);
      await expect(again).rejects.toMatchObject({
        code: "TENANT_EXISTS",
        message: 'Tenant "twice" already exists.',
        issues: [{ code: "TENANT_EXISTS", field: "name", path: "name", message: 'Tenant "twice" already exists.' }],
      });
      await expect(repo.createTenant("default", null)).rejects.toMatchObject({ code: "TENANT_EXISTS" });
      expect((await repo.getTenant("twice"))?.sequencePrefix).toBe("ONE-");
      // Names are exact: another case is another tenant.
      expect((await repo.createTenant("Twice", null)).name).toBe("Twice");
    });

    it("lists every tenant by name", async () => {
      const names = (await repo.listTenants()).map((t) => t.name);
      expect(names).toEqual(expect.arrayContaining(["acme", "bare", "default", "other", "twice", "Twice"]));
      expect(names).toEqual([...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    });
  });

  describe("agents", () => {
    async function createAgents(into: string, names: string[]): Promise<AgentRef[]> {
      const refs: AgentRef[] = [];
      for (const name of names) refs.push(await repo.write(into, (tx) => tx.createAgent("Provider=Acme", name)));
      return refs;
    }

    it(
      "numbers a tenant's agents 1, 2, 3 with reference ids from its prefix, independently of other " + "tenants",
      async () => {
        await repo.createTenant("seq-one", "ONE-");
        await repo.createTenant("seq-two", "TWO/");
        expect(await createAgents("seq-one", ["a", "b"])).toEqual([
          { number: 1, referenceId: "Agent_ID=ONE-1" },
          { number: 2, referenceId: "Agent_ID=ONE-2" },
        ]);
        expect(await createAgents("seq-two", ["a", "b"])).toEqual([
          { number: 1, referenceId: "Agent_ID=TWO/1" },
          { number: 2, referenceId: "Agent_ID=TWO/2" },
        ]);
        expect(await createAgents("seq-one", ["c"])).toEqual([{ number: 3, referenceId: "Agent_ID=ONE-3" }]);
        expect((await repo.getTenant("seq-one"))?.nextAgentNumber).toBe(4);
        expect((await repo.getTenant("seq-two"))?.nextAgentNumber).toBe(3);
        expect(await repo.write("seq-one", (tx) => tx.findAgentByName("Provider=Acme", "c"))).toEqual({
          number: 3,
          referenceId: "Agent_ID=ONE-3",
        });
        expect(await repo.write("seq-one", (tx) => tx.findAgentByName("Provider=Acme", "C"))).toBeUndefined();
      },
    );

    it("hands the work the tenant's name and prefix, the same on every write", async () => {
      await repo.createTenant("seen", "SEEN-");
      await createAgents("seen", ["x"]);
      const seen = await repo.write("seen", async (tx) => tx.tenant);
      expect(seen).toEqual({ name: "seen", sequencePrefix: "SEEN-" });
      expect(await repo.write("seen", async (tx) => tx.tenant)).toEqual(seen);
    });

    it("finds a tenant made by another process after a write for it was refused", async () => {
      await expect(repo.write("late", async (tx) => tx.tenant)).rejects.toMatchObject({ code: "TENANT_NOT_FOUND" });
      // Another process (a second repository on the same database) makes it: the refusal was not remembered.
      const other = await createSqlRepository(target());
      try {
        await other.createTenant("late", "LATE-");
      } finally {
        await other.close();
      }
      expect(await repo.write("late", async (tx) => tx.tenant)).toEqual({ name: "late", sequencePrefix: "LATE-" });
      const agent = await repo.write("late", (tx) => tx.createAgent("Provider=Acme", "first"));
      expect(agent.referenceId).toBe("Agent_ID=LATE-1");
    });

    it("refuses to number an agent in a tenant without a sequence generator, writing nothing", async () => {
      await repo.createTenant("no-seq", null);
      await expect(repo.write("no-seq", (tx) => tx.createAgent("Provider=Acme", "x"))).rejects.toThrow(
        /no agent id sequence generator/,
      );
      expect(await count("agents", { tenant: "no-seq" })).toBe(0);
      expect((await repo.getTenant("no-seq"))?.nextAgentNumber).toBe(1);
    });

    it("knows which agent holds an externalAgentID, per provider", async () => {
      await repo.createTenant("ext", "EXT-");
      const owner = await repo.write("ext", async (tx) => {
        const agent = await tx.createAgent("Provider=Acme", "holder");
        await tx.claimExternalId("Provider=Acme", "ext-1", agent.number);
        return agent;
      });
      expect(await repo.write("ext", (tx) => tx.findExternalIdOwner("Provider=Acme", "ext-1"))).toBe(owner.number);
      expect(await repo.write("ext", (tx) => tx.findExternalIdOwner("Provider=Other", "ext-1"))).toBeUndefined();
      expect(await repo.write("ext", (tx) => tx.findExternalIdOwner("Provider=Acme", "EXT-1"))).toBeUndefined();
    });
  });

  describe("writing definitions", () => {
    it("creates an instance with a new agent, then updates it in place under the same key", async () => {
      const first = await save(repo, definition({ name: "In place", description: "first" }));
      expect(first.created).toBe(true);
      expect(first.stored.id).toMatch(/^[0-9a-f]{32}$/);
      expect(fromJsonBytes(first.stored).id).toBe(first.stored.id);
      expect(first.stored.agent.referenceId).toMatch(/^Agent_ID=AGENT-\d+$/);
      expect(fromJsonBytes(first.stored).referenceId).toBe(first.stored.agent.referenceId);

      await sleep(5);
      const second = await save(repo, definition({ name: "In place", description: "second" }));
      expect(second.created).toBe(false);
      expect(second.stored.id).toBe(first.stored.id);
      expect(second.stored.agent).toEqual(first.stored.agent);
      expect(fromJsonBytes(second.stored).description).toBe("second");
      expect(fromBinaryBytes(second.stored).description).toBe("second");

      const got = await repo.get(tenant, first.stored.id);
      expect(fromJsonBytes(got!).description).toBe("second");
      expect(fromBinaryBytes(got!).description).toBe("second");
      expect(got?.agent).toEqual(first.stored.agent);
      expect(got?.createdAt.getTime()).toBe(first.stored.createdAt.getTime());
      expect(got?.updatedAt.getTime()).toBeGreaterThan(first.stored.updatedAt.getTime());
      expect(got?.updatedAt.getTime()).toBe(second.stored.updatedAt.getTime());
      expect(await count("agent_definitions", { tenant, name: "In place" })).toBe(1);
      expect(await count("agents", { tenant, name: "In place" })).toBe(1);
    });

    it("finds inside the transaction what it wrote, by key, id and reference", async () => {
      const def = definition({ name: "Seen inside" });
      await repo.write(tenant, async (tx) => {
        expect(await tx.findByKey(keyOf(def))).toBeUndefined();
        const agent = await tx.createAgent("Provider=Acme", def.name);
        const record = await tx.insert(keyOf(def), agent, withIds(def, newId(), agent.referenceId));
        // With its key and lifecycle columns (migration 0008): a new version is ACTIVE, revision 1, its agent's latest.
        expect(await tx.findByKey(keyOf(def))).toEqual({
          id: record.id,
          tenant,
          agent,
          key: keyOf(def),
          binary: bytes(record.binary),
          createdAt: record.createdAt,
          updatedAt: record.updatedAt,
          revision: 1,
          // Taken as the transaction commits, not before.
          modRevision: 0,
          status: "ACTIVE",
          statusMessage: null,
          statusChangedAt: record.createdAt,
          latest: true,
        });
        expect((await tx.findById(record.id))?.agent).toEqual(agent);
        expect((await tx.findNewestByReference(agent.referenceId))?.id).toBe(record.id);
        expect(await tx.findById("not-an-id")).toBeUndefined();
      });
    });

    // White space at either end of a name or version is refused before storage since issue 50 (identifying-text.ts),
    // so a PAD SPACE collation's "1.0.0" = "1.0.0 " cannot come from a write any more; keyed-reads.test.ts still
    // reads with a trailing space.
    it("compares the key exactly: case and inner spacing make different keys and agents", async () => {
      const names = ["Exact", "exact", "Ex act", "EXACT"];
      const results = [];
      for (const name of names) results.push(await save(repo, definition({ name })));
      expect(results.map((r) => r.created)).toEqual([true, true, true, true]);
      expect(new Set(results.map((r) => r.stored.id)).size).toBe(names.length);
      expect(new Set(results.map((r) => r.stored.agent.number)).size).toBe(names.length);
      const versions = [];
      for (const version of ["1.0.0-a", "1.0.0-A", "1.0.0- a"])
        versions.push(await save(repo, definition({ name: "Exact v", version })));
      expect(versions.map((r) => r.created)).toEqual([true, true, true]);
      // Versions of one name and provider are one agent.
      expect(new Set(versions.map((r) => r.stored.agent.number)).size).toBe(1);
      const providers = [];
      for (const id of ["Provider=Acme", "provider=acme"])
        providers.push(await save(repo, definition({ name: "Exact p", provider: { id } })));
      expect(providers.map((r) => r.created)).toEqual([true, true]);
      expect(new Set(providers.map((r) => r.stored.agent.number)).size).toBe(2);
    });

    it("scopes keys and agents by tenant", async () => {
      const def = definition({ name: "Per tenant" });
      const here = await save(repo, def);
      const there = await save(repo, def, "other");
      expect(there.created).toBe(true);
      expect(there.stored.id).not.toBe(here.stored.id);
      expect(there.stored.agent.referenceId).toMatch(/^Agent_ID=OTHER-\d+$/);
      expect(await repo.get("other", here.stored.id)).toBeUndefined();
      expect((await repo.get(tenant, here.stored.id))?.tenant).toBe(tenant);
      expect(await repo.getNewestByReference("other", here.stored.agent.referenceId)).toBeUndefined();
    });

    it("rejects an unknown tenant with TENANT_NOT_FOUND without running the work", async () => {
      let ran = false;
      const attempt = repo.write("nope", async () => {
        ran = true;
      });
      await expect(attempt).rejects.toBeInstanceOf(RegistryError);
      await expect(attempt).rejects.toMatchObject({ code: "TENANT_NOT_FOUND" });
      expect(ran).toBe(false);
    });

    it("refuses an update that would change the id of an existing instance, keeping the stored one", async () => {
      const original = await save(repo, definition({ name: "Stable id", description: "original" }));
      const moved = repo.write(tenant, async (tx) => {
        const existing = await tx.findByKey(keyOf(fromJsonBytes(original.stored)));
        await tx.update(
          existing!,
          withIds(definition({ name: "Stable id", description: "moved" }), newId(), existing!.agent.referenceId),
        );
      });
      await expect(moved).rejects.toThrow(/existing instance/);
      expect(fromJsonBytes((await repo.get(tenant, original.stored.id))!).description).toBe("original");
    });

    it("refuses to insert under an id that is not 32 lowercase hex", async () => {
      const def = definition({ name: "Bad id" });
      const attempt = repo.write(tenant, async (tx) => {
        const agent = await tx.createAgent("Provider=Acme", def.name);
        await tx.insert(keyOf(def), agent, withIds(def, "ABC", agent.referenceId));
      });
      await expect(attempt).rejects.toThrow(/32 lowercase hex/);
      expect(await count("agents", { tenant, name: "Bad id" })).toBe(0);
    });

    it("fails loudly when a WriteTransaction is used after its write ended", async () => {
      let kept: WriteTransaction | undefined;
      await repo.write(tenant, async (tx) => {
        kept = tx;
      });
      await expect(kept!.findById(newId())).rejects.toThrow(/after its write\(\) ended/);
    });

    it("answers undefined for an id or reference it does not hold, including malformed ones", async () => {
      expect(await repo.get(tenant, newId())).toBeUndefined();
      expect(await repo.get(tenant, "not-an-id")).toBeUndefined();
      expect(await repo.get(tenant, "🤖".repeat(16))).toBeUndefined();
      expect(await repo.getNewestByReference(tenant, "Agent_ID=AGENT-999999")).toBeUndefined();
      expect(await repo.getNewestByReference(tenant, "Agent_ID=🤖")).toBeUndefined();
    });

    it("says TENANT_NOT_FOUND from every read of a tenant that does not exist, whatever it asks for", async () => {
      const missing = { code: "TENANT_NOT_FOUND", message: 'Tenant "nope" does not exist.' };
      await expect(repo.get("nope", newId())).rejects.toMatchObject(missing);
      await expect(repo.get("nope", "not-an-id")).rejects.toMatchObject(missing);
      await expect(repo.getNewestByReference("nope", "Agent_ID=AGENT-1")).rejects.toMatchObject(missing);
      await expect(repo.search("nope", unfilteredQuery(10, 0))).rejects.toMatchObject(missing);
      await expect(repo.search("nope", unfilteredQuery(0, 0))).rejects.toMatchObject(missing);
      await expect(repo.listVersions("nope", 1, { limit: 10, offset: 0 })).rejects.toMatchObject(missing);
      await expect(repo.listVersions("nope", Number.MAX_VALUE, { limit: 10, offset: 0 })).rejects.toMatchObject(
        missing,
      );
      // Names are exact: another case is another (missing) tenant.
      await expect(repo.get("Default", newId())).rejects.toMatchObject({ code: "TENANT_NOT_FOUND" });
      await expect(repo.get("nope", newId())).rejects.toBeInstanceOf(RegistryError);
    });

    it("answers both encodings byte for byte as written, from every read", async () => {
      const { stored } = await save(
        repo,
        definition({ name: "Encodings", description: 'Ünïcødé 🤖 and "quotes"', externalAgentId: "ext-encodings" }),
      );
      // What was written: protobuf JSON of the message, its empty lists shown as [], and the binary of the
      // same message.
      const message = fromBinaryBytes(stored);
      expect(equals(AgentDefinitionSchema, fromJsonBytes(stored), message)).toBe(true);
      expect(JSON.parse(new TextDecoder().decode(stored.json))).toMatchObject({
        hostConfig: [],
        defaultInputModes: [],
      });
      expect(bytes(stored.binary)).toEqual(bytes(toBinary(AgentDefinitionSchema, fromJsonBytes(stored))));
      const reads: Array<StoredDefinition | undefined> = [
        await repo.get(tenant, stored.id),
        await repo.getNewestByReference(tenant, stored.agent.referenceId),
        (await repo.search(tenant, unfilteredQuery(100, 0))).items.find((r) => r.id === stored.id),
        (await repo.listVersions(tenant, stored.agent.number, { limit: 10, offset: 0 })).items[0],
      ];
      for (const read of reads) {
        expect(read).toBeDefined();
        expect(bytes(read!.json)).toEqual(bytes(stored.json));
        expect(bytes(read!.binary)).toEqual(bytes(stored.binary));
        expect(read).toMatchObject({
          id: stored.id,
          tenant,
          agent: stored.agent,
          createdAt: stored.createdAt,
          updatedAt: stored.updatedAt,
        });
      }
      // Reads hand the driver's bytes over as they are: no string to encode on the way out.
      expect(reads[0]!.json).toBeInstanceOf(Uint8Array);
      expect(reads[0]!.binary).toBeInstanceOf(Uint8Array);
    });

    it("stores 4-byte unicode verbatim, in keys and in the document", async () => {
      const fields = {
        name: "Agent 🤖 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
        description: "Emoji 😀👍🏽 and CJK 漢字 and combining é (e + U+0301)",
        provider: { id: "Provider=Ünïcødé🏭" },
        externalAgentId: "ext-🤖",
      };
      const def = definition(fields);
      const created = await save(repo, def);
      const got = await repo.get(tenant, created.stored.id);
      const read = fromJsonBytes(got!);
      expect(read.name).toBe(def.name);
      expect(read.description).toBe(def.description);
      expect(read.provider?.id).toBe(def.provider?.id);
      expect(equals(AgentDefinitionSchema, read, fromJsonBytes(created.stored))).toBe(true);
      expect(equals(AgentDefinitionSchema, fromBinaryBytes(got!), read)).toBe(true);
      expect(bytes(got!.json)).toEqual(bytes(created.stored.json));
      // A different emoji is a different key, agent and externalAgentID, not a collation-equal one.
      const other = await save(
        repo,
        definition({ ...fields, name: fields.name.replace("🤖", "👾"), externalAgentId: "ext-👾" }),
      );
      expect(other.created).toBe(true);
      expect(other.stored.agent.number).not.toBe(created.stored.agent.number);
    });
  });

  describe("a write that fails", () => {
    const failing = "failing";

    beforeAll(async () => {
      await repo.createTenant(failing, "F-");
      // A real failure of a statement after the first ones: the database refuses one name.
      if (db.name === "mariadb") {
        await raw.db.raw(`
          CREATE TRIGGER refuse_boom BEFORE INSERT ON agent_definitions FOR EACH ROW
          IF NEW.name = 'boom' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'forced'; END IF`);
      } else {
        await raw.db.raw(`
          CREATE TRIGGER refuse_boom BEFORE INSERT ON agent_definitions WHEN NEW.name = 'boom'
          BEGIN SELECT RAISE(ABORT, 'forced'); END`);
      }
      // Agent 1 exists before the failures, so numbers taken by them would show.
      await save(repo, definition({ name: "before" }), failing);
    });

    async function expectNoTrace(): Promise<void> {
      expect(await count("agents", { tenant: failing })).toBe(1);
      expect(await count("agent_external_ids", { tenant: failing })).toBe(0);
      expect(await count("agent_definitions", { tenant: failing })).toBe(1);
      expect((await repo.getTenant(failing))?.nextAgentNumber).toBe(2);
    }

    it("leaves no trace when the database refuses a statement after an agent and a claim were written", async () => {
      const def = definition({ name: "boom", externalAgentId: "ext-boom" });
      let attempts = 0;
      let wrote: AgentRef | undefined;
      const attempt = repo.write(failing, async (tx) => {
        attempts++;
        const agent = await tx.createAgent("Provider=Acme", def.name);
        await tx.claimExternalId("Provider=Acme", "ext-boom", agent.number);
        wrote = agent;
        await tx.insert(keyOf(def), agent, withIds(def, newId(), agent.referenceId));
      });
      await expect(attempt).rejects.toThrow(/forced/);
      await expect(attempt).rejects.not.toBeInstanceOf(RegistryError);
      expect(wrote).toEqual({ number: 2, referenceId: "Agent_ID=F-2" }); // both writes really ran
      expect(attempts).toBe(1); // not a race: not retried
      await expectNoTrace();
    });

    it("leaves no trace when the work throws a RegistryError after writing, and passes it through", async () => {
      const refusal = new RegistryError("A3015", "clash");
      const def = definition({ name: "refused", externalAgentId: "ext-refused" });
      let attempts = 0;
      const attempt = repo.write(failing, async (tx) => {
        attempts++;
        const agent = await tx.createAgent("Provider=Acme", def.name);
        await tx.claimExternalId("Provider=Acme", "ext-refused", agent.number);
        await tx.insert(keyOf(def), agent, withIds(def, newId(), agent.referenceId));
        throw refusal;
      });
      await expect(attempt).rejects.toBe(refusal);
      expect(attempts).toBe(1);
      await expectNoTrace();
    });

    it("retries a duplicate key, rolls every attempt back and reports CONFLICT when it persists", async () => {
      const holder = await repo.get(failing, (await repo.search(failing, unfilteredQuery(1, 0))).items[0]!.id);
      const def = definition({ name: "Id thief" });
      let attempts = 0;
      const attempt = repo.write(failing, async (tx) => {
        attempts++;
        const agent = await tx.createAgent("Provider=Acme", def.name);
        await tx.insert(keyOf(def), agent, withIds(def, holder!.id, agent.referenceId));
      });
      await expect(attempt).rejects.toMatchObject({ code: "CONFLICT" });
      expect(attempts).toBe(8);
      await expectNoTrace();
      expect(fromJsonBytes((await repo.get(failing, holder!.id))!).name).toBe("before");
    });

    it("does not commit a work that swallowed a race and went on", async () => {
      const holder = (await repo.search(failing, unfilteredQuery(1, 0))).items[0]!;
      const def = definition({ name: "Swallower" });
      const attempt = repo.write(failing, async (tx) => {
        const agent = await tx.createAgent("Provider=Acme", def.name);
        await tx.insert(keyOf(def), agent, withIds(def, holder.id, agent.referenceId)).catch(() => undefined);
        return "done";
      });
      await expect(attempt).rejects.toMatchObject({ code: "CONFLICT" });
      await expectNoTrace();
    });

    it("gives the next agent the next number after all those failures", async () => {
      const next = await save(repo, definition({ name: "after" }), failing);
      expect(next.stored.agent).toEqual({ number: 2, referenceId: "Agent_ID=F-2" });
    });
  });

  describe("versions", () => {
    const versioned = "versioned";
    const ids: Record<string, string> = {};

    beforeAll(async () => {
      await repo.createTenant(versioned, "V-");
      for (const version of ["1.0", "1.1", "2.0"]) {
        ids[version] = (
          await save(repo, definition({ name: "Lineage", version, description: `v${version}` }), versioned)
        ).stored.id;
      }
      ids.single = (await save(repo, definition({ name: "Single" }), versioned)).stored.id;
      // Updating an old version in place does not make it the newest.
      await save(repo, definition({ name: "Lineage", version: "1.0", description: "v1.0 updated" }), versioned);
    });

    it("answers the newest version for an agent's reference id", async () => {
      const newest = await repo.getNewestByReference(versioned, "Agent_ID=V-1");
      expect(newest?.id).toBe(ids["2.0"]);
      expect(newest?.agent).toEqual({ number: 1, referenceId: "Agent_ID=V-1" });
      expect((await repo.getNewestByReference(versioned, "Agent_ID=V-2"))?.id).toBe(ids.single);
      expect(await repo.getNewestByReference(versioned, "Agent_ID=V-3")).toBeUndefined();
      expect(await repo.getNewestByReference(versioned, "Agent_ID=v-1")).toBeUndefined();
      const inside = await repo.write(versioned, (tx) => tx.findNewestByReference("Agent_ID=V-1"));
      expect(inside?.id).toBe(ids["2.0"]);
    });

    it("pages an agent's versions newest first with the total of that agent", async () => {
      const first = await repo.listVersions(versioned, 1, { limit: 2, offset: 0 });
      const second = await repo.listVersions(versioned, 1, { limit: 2, offset: 2 });
      expect([first.total, second.total]).toEqual([3, 3]);
      expect([...first.items, ...second.items].map((r) => r.id)).toEqual([ids["2.0"], ids["1.1"], ids["1.0"]]);
      expect(fromJsonBytes(second.items[0]!).description).toBe("v1.0 updated");
      expect(first.items.every((r) => r.agent.referenceId === "Agent_ID=V-1")).toBe(true);
      expect(await repo.listVersions(versioned, 1, { limit: 0, offset: 0 })).toEqual({
        total: 3,
        items: [],
        revision: expect.any(Number),
      });
      expect(await repo.listVersions(versioned, 1, { limit: 5, offset: 9 })).toEqual({
        total: 3,
        items: [],
        revision: expect.any(Number),
      });
      expect((await repo.listVersions(versioned, 2, { limit: 5, offset: 0 })).items.map((r) => r.id)).toEqual([
        ids.single,
      ]);
      expect(await repo.listVersions(versioned, 3, { limit: 5, offset: 0 })).toMatchObject({ total: 0, items: [] });
      expect(await repo.listVersions("default", 1_000_000, { limit: 5, offset: 0 })).toMatchObject({
        total: 0,
        items: [],
      });
    });
  });

  describe("listing", () => {
    const listed = "listed";

    beforeAll(async () => {
      await repo.createTenant(listed, "L-");
      for (let i = 0; i < 7; i++) await save(repo, definition({ name: `Listed ${i}` }), listed);
      // Updating one must not move it in the order.
      await save(repo, definition({ name: "Listed 2", description: "updated" }), listed);
    });

    it("pages the tenant's definitions oldest first with the total of all of them", async () => {
      const first = await repo.search(listed, unfilteredQuery(3, 0));
      const second = await repo.search(listed, unfilteredQuery(3, 3));
      const third = await repo.search(listed, unfilteredQuery(3, 6));
      expect([first.total, second.total, third.total]).toEqual([7, 7, 7]);
      const all = [...first.items, ...second.items, ...third.items];
      expect(all.map((r) => fromJsonBytes(r).name)).toEqual(Array.from({ length: 7 }, (_, i) => `Listed ${i}`));
      expect(all.map((r) => r.agent.referenceId)).toEqual(Array.from({ length: 7 }, (_, i) => `Agent_ID=L-${i + 1}`));
      expect(fromJsonBytes(first.items[2]!).description).toBe("updated");
    });

    it("answers the same order every time", async () => {
      const a = await repo.search(listed, unfilteredQuery(100, 0));
      const b = await repo.search(listed, unfilteredQuery(100, 0));
      expect(b.items.map((r) => r.id)).toEqual(a.items.map((r) => r.id));
    });

    it("answers an empty page past the end, and for limit 0, with the total", async () => {
      expect(await repo.search(listed, unfilteredQuery(10, 50))).toEqual({ total: 7, items: [], revision: 8 });
      expect(await repo.search(listed, unfilteredQuery(0, 0))).toEqual({ total: 7, items: [], revision: 8 });
    });

    it("takes any page bounds: negative as 0, fractions cut, no bound as all", async () => {
      expect((await repo.search(listed, unfilteredQuery(Number.POSITIVE_INFINITY, -3))).items).toHaveLength(7);
      const cut = await repo.search(listed, unfilteredQuery(2.9, 1.5));
      expect(cut.items.map((r) => fromJsonBytes(r).name)).toEqual(["Listed 1", "Listed 2"]);
      expect(await repo.search(listed, unfilteredQuery(Number.NaN, 0))).toEqual({ total: 7, items: [], revision: 8 });
      expect(await repo.search(listed, unfilteredQuery(10, Number.MAX_VALUE))).toEqual({
        total: 7,
        items: [],
        revision: 8,
      });
    });

    it("lists only the tenant's own definitions", async () => {
      await repo.createTenant("empty", "E-");
      expect(await repo.search("empty", unfilteredQuery(10, 0))).toEqual({ total: 0, items: [], revision: 0 });
      const page = await repo.search(listed, unfilteredQuery(100, 0));
      expect(page.items.every((r) => r.tenant === listed)).toBe(true);
    });
  });

  describe("migrations", () => {
    const own = useFreshDatabase(db);

    it("roll all the way back and forward again", async () => {
      const first = await createSqlRepository(own());
      await save(first, definition({ name: "Before rollback" }));
      await first.close();
      const direct = await openDatabase(own());
      try {
        await migrateToNothing(direct.db);
        for (const table of ["agent_definitions", "agent_external_ids", "agents", "tenants"]) {
          expect(await direct.db.schema.hasTable(table), table).toBe(false);
        }
        await migrateToLatest(direct.db);
        expect(await direct.db.schema.hasTable("agent_definitions")).toBe(true);
        const again = await createSqlRepository(own());
        expect(await again.getTenant("default")).toMatchObject({ sequencePrefix: "AGENT-", nextAgentNumber: 1 });
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
        const flaky = await createSqlRepository({ databaseUrl: viaProxy.toString(), dataDir: fresh.dataDir });
        try {
          expect(await flaky.getTenant(tenant)).toBeDefined();
          await new Promise<void>((resolve) => {
            proxy.close(() => resolve());
            for (const socket of sockets) socket.destroy();
          });
          const gone = { code: "UNAVAILABLE" };
          await expect(flaky.get(tenant, newId())).rejects.toMatchObject(gone);
          await expect(flaky.getNewestByReference(tenant, "Agent_ID=AGENT-1")).rejects.toMatchObject(gone);
          await expect(flaky.search(tenant, unfilteredQuery(1, 0))).rejects.toMatchObject(gone);
          await expect(flaky.listVersions(tenant, 1, { limit: 1, offset: 0 })).rejects.toMatchObject(gone);
          await expect(flaky.getTenant(tenant)).rejects.toMatchObject(gone);
          await expect(flaky.listTenants()).rejects.toMatchObject(gone);
          await expect(flaky.createTenant("later", null)).rejects.toMatchObject(gone);
          await expect(save(flaky, definition({ name: "Unreachable" }))).rejects.toMatchObject(gone);
        } finally {
          await flaky.close();
        }
      });
    });
  }
});

describe("an unreachable MySQL server", () => {
  it("fails the start with UNAVAILABLE, not a raw driver error", async () => {
    const attempt = createSqlRepository({
      databaseUrl: "mysql://root@127.0.0.1:1/asor",
      dataDir: "/nonexistent-unused",
    });
    await expect(attempt).rejects.toBeInstanceOf(RegistryError);
    await expect(attempt).rejects.toMatchObject({ code: "UNAVAILABLE" });
  });
});
