/**
 * Revisions in commit order (issue 20, item 1), on the real databases: every
 * write that changes what a read answers takes the tenant's next revision(s)
 * and appends one change record per version it changed, in its own
 * transaction; the versions remember the revision that last changed them; and
 * reads answer the revision they read at.
 */
import { create } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DefinitionStatus } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  SetAgentDefinitionStatusRequestSchema,
  UpdateAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { unfilteredQuery } from "../../src/domain/list-query.js";
import { createRegistryService, type RegistryService } from "../../src/service/registry-service.js";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import type { Database } from "../../src/storage/run/connection.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { definition, host, keyOf, newId, save, withIds } from "./fixtures.js";

interface ChangeRow {
  revision: number;
  kind: string;
  definition_id: string;
  agent_number: number;
}

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  let service: RegistryService;
  /** A second, direct connection to look at what is really stored. */
  let raw: Database;

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    service = createRegistryService({ repository: repo, host });
    raw = await openDatabase(target());
  });

  afterAll(async () => {
    await repo?.close();
    await raw?.db.destroy();
  });

  /** The tenant's change records from `after` on, in revision order. */
  async function changes(tenant: string, after = 0): Promise<ChangeRow[]> {
    const rows = (await raw
      .db("definition_changes")
      .where({ tenant })
      .andWhere("revision", ">", after)
      .orderBy("revision")
      .select("revision", "kind", "definition_id", "agent_number")) as ChangeRow[];
    return rows.map((row) => ({ ...row, revision: Number(row.revision), agent_number: Number(row.agent_number) }));
  }

  /** The tenant's counter as stored. */
  async function counter(tenant: string): Promise<number> {
    const row = (await raw.db("tenant_revisions").where({ tenant }).first("revision")) as
      | { revision: number | string }
      | undefined;
    return Number(row?.revision ?? 0);
  }

  /** Each version's mod_revision as stored, by id. */
  async function modRevisions(tenant: string): Promise<Record<string, number>> {
    const rows = (await raw.db("agent_definitions").where({ tenant }).select("id", "mod_revision")) as Array<{
      id: string;
      mod_revision: number | string;
    }>;
    return Object.fromEntries(rows.map((row) => [row.id, Number(row.mod_revision)]));
  }

  const setStatus = (tenant: string, id: string, status: DefinitionStatus) =>
    service.setStatus(tenant, create(SetAgentDefinitionStatusRequestSchema, { id, statusChange: { status } }));

  describe("every write kind", () => {
    const tenant = "kinds";
    beforeAll(() => repo.createTenant(tenant, "K-"));

    it("takes the next revision and appends one change record, and the version shows it as modRevision", async () => {
      // Create: a new agent.
      const created = await save(repo, definition({ name: "Kinds" }), tenant);
      expect(created.stored.modRevision).toBe(1);
      expect(await changes(tenant)).toEqual([
        { revision: 1, kind: "ADDED", definition_id: created.stored.id, agent_number: 1 },
      ]);

      // Update by POST (the same key, new content).
      const posted = await save(repo, definition({ name: "Kinds", description: "POSTed again" }), tenant);
      expect(posted.created).toBe(false);
      expect(posted.stored.modRevision).toBe(2);
      expect(await changes(tenant, 1)).toEqual([
        { revision: 2, kind: "MODIFIED", definition_id: created.stored.id, agent_number: 1 },
      ]);

      // Update by PUT (by id).
      const put = await service.update(
        tenant,
        create(UpdateAgentDefinitionRequestSchema, {
          id: created.stored.id,
          agentCardAndTools: definition({ name: "Kinds", description: "PUT" }),
        }),
      );
      expect(put.modRevision).toBe(3);
      expect(await changes(tenant, 2)).toEqual([
        { revision: 3, kind: "MODIFIED", definition_id: created.stored.id, agent_number: 1 },
      ]);

      // A status change.
      const deprecated = await setStatus(tenant, created.stored.id, DefinitionStatus.DEPRECATED);
      expect(deprecated.data.map((d) => d.modRevision)).toEqual([4]);
      expect(await changes(tenant, 3)).toEqual([
        { revision: 4, kind: "STATUS_CHANGED", definition_id: created.stored.id, agent_number: 1 },
      ]);

      expect(await counter(tenant)).toBe(4);
      expect(await modRevisions(tenant)).toEqual({ [created.stored.id]: 4 });
      const read = await repo.find(tenant, created.stored.id);
      expect(read.stored?.modRevision).toBe(4);
      expect(read.revision).toBe(4);
    });

    it("gives a version whose latest flag moves a revision of its own (MODIFIED), after the write's own", async () => {
      const v1 = await save(repo, definition({ name: "Flags", version: "1" }), tenant);
      const before = await counter(tenant);
      // A new version takes the flag from v1: v1's meta.latest changes, so v1 changes.
      const v2 = await save(repo, definition({ name: "Flags", version: "2" }), tenant);
      const agent = v1.stored.agent.number;
      expect(await changes(tenant, before)).toEqual([
        { revision: before + 1, kind: "MODIFIED", definition_id: v1.stored.id, agent_number: agent },
        { revision: before + 2, kind: "ADDED", definition_id: v2.stored.id, agent_number: agent },
      ]);
      expect(v2.stored.modRevision).toBe(before + 2);
      expect((await repo.get(tenant, v1.stored.id))?.modRevision).toBe(before + 1);

      // Deactivating v2 hands the flag back to v1: v2 STATUS_CHANGED, v1 MODIFIED, in one write.
      const deactivated = await setStatus(tenant, v2.stored.id, DefinitionStatus.DEACTIVATED);
      expect(await changes(tenant, before + 2)).toEqual([
        { revision: before + 3, kind: "STATUS_CHANGED", definition_id: v2.stored.id, agent_number: agent },
        { revision: before + 4, kind: "MODIFIED", definition_id: v1.stored.id, agent_number: agent },
      ]);
      expect(deactivated.data.map((d) => [d.id, d.modRevision, d.latest])).toEqual([[v2.stored.id, before + 3, false]]);
      const v1Now = await repo.get(tenant, v1.stored.id);
      expect([v1Now?.latest, v1Now?.modRevision]).toEqual([true, before + 4]);

      // A status change of every version of the agent: one revision each, newest first as the write went.
      await service.setStatus(
        tenant,
        create(SetAgentDefinitionStatusRequestSchema, {
          id: v1.stored.agent.referenceId,
          statusChange: { status: DefinitionStatus.DEPRECATED },
        }),
      );
      const all = await changes(tenant, before + 4);
      expect(all.map((c) => [c.revision, c.kind, c.definition_id])).toEqual([
        [before + 5, "STATUS_CHANGED", v2.stored.id],
        [before + 6, "STATUS_CHANGED", v1.stored.id],
      ]);
      expect(await counter(tenant)).toBe(before + 6);
    });

    it("takes no revision for a POST that changes nothing", async () => {
      const def = definition({ name: "Idempotent" });
      const first = await save(repo, def, tenant);
      const before = await counter(tenant);
      const again = await save(repo, def, tenant);
      expect(again.stored.modRevision).toBe(first.stored.modRevision);
      expect(await counter(tenant)).toBe(before);
      expect(await changes(tenant, before)).toEqual([]);
    });

    it("takes no revision for a write that fails or is rolled back; the next write takes the next one", async () => {
      const before = await counter(tenant);
      const failing = repo.write(tenant, async (tx) => {
        const def = definition({ name: "Rolled back" });
        const agent = await tx.createAgent("Provider=Acme", def.name);
        await tx.insert(keyOf(def), agent, withIds(def, newId(), agent.referenceId));
        throw new Error("the work fails after writing");
      });
      await expect(failing).rejects.toThrow("the work fails after writing");
      // A write the service refuses inside its transaction (PUT of an id that is not there).
      await expect(
        service.update(
          tenant,
          create(UpdateAgentDefinitionRequestSchema, { id: newId(), agentCardAndTools: definition({ name: "None" }) }),
        ),
      ).rejects.toMatchObject({ code: "NOT_FOUND" });
      expect(await counter(tenant)).toBe(before);
      expect(await changes(tenant, before)).toEqual([]);
      const next = await save(repo, definition({ name: "After the failures" }), tenant);
      expect(next.stored.modRevision).toBe(before + 1);
    });
  });

  describe("reads", () => {
    const tenant = "reads";
    beforeAll(() => repo.createTenant(tenant, "R-"));

    it("answer the revision they read at: 0 before any write, then the tenant's last", async () => {
      expect((await repo.search(tenant, unfilteredQuery(10, 0))).revision).toBe(0);
      const a = await save(repo, definition({ name: "Read A" }), tenant);
      await save(repo, definition({ name: "Read B" }), tenant);
      const page = await repo.search(tenant, unfilteredQuery(10, 0));
      expect(page.revision).toBe(2);
      expect(page.items.map((d) => d.modRevision)).toEqual([1, 2]);
      expect((await repo.find(tenant, a.stored.id)).revision).toBe(2);
      expect((await repo.findNewestByReference(tenant, a.stored.agent.referenceId)).revision).toBe(2);
      // Nothing found still answers the revision (the tenant's row was read).
      expect(await repo.find(tenant, newId())).toEqual({ stored: undefined, revision: 2 });
      expect((await repo.listVersions(tenant, a.stored.agent.number, { limit: 5, offset: 0 })).revision).toBe(2);
    });
  });

  describe("tenants", () => {
    it("count apart: one tenant's writes move neither another's counter nor its change log", async () => {
      await repo.createTenant("iso-a", "A-");
      await repo.createTenant("iso-b", "B-");
      await save(repo, definition({ name: "Iso" }), "iso-a");
      await save(repo, definition({ name: "Iso", description: "again" }), "iso-a");
      const b = await save(repo, definition({ name: "Iso" }), "iso-b");
      expect([await counter("iso-a"), await counter("iso-b")]).toEqual([2, 1]);
      expect(b.stored.modRevision).toBe(1);
      expect((await changes("iso-b")).map((c) => c.definition_id)).toEqual([b.stored.id]);
      expect((await repo.search("iso-b", unfilteredQuery(10, 0))).revision).toBe(1);
    });
  });

  describe("concurrent writers in one tenant", () => {
    const tenant = "busy";
    beforeAll(() => repo.createTenant(tenant, "BUSY-"));

    it(
      "take gap-free revisions in commit order: a reader of the change log never sees revision n + 1 " + "before n",
      async () => {
        // Some agents to update and to change the status of.
        const seeded: Array<Awaited<ReturnType<typeof save>>> = [];
        for (let i = 0; i < 10; i++) seeded.push(await save(repo, definition({ name: `Busy ${i}` }), tenant));
        const start = await counter(tenant);

        // A reader polling the change log as a watcher would: each poll must continue exactly where the last
        // ended. A revision that committed before a smaller one would show as a gap in some poll.
        let seen = start;
        let polls = 0;
        let writing = true;
        const gaps: string[] = [];
        const reader = (async () => {
          while (writing || seen < (await counter(tenant))) {
            polls++;
            for (const change of await changes(tenant, seen)) {
              if (change.revision !== seen + 1) gaps.push(`after ${seen} came ${change.revision}`);
              seen = change.revision;
            }
            // A turn of the event loop after each poll, as a watcher's timer gives: on SQLite every statement
            // answers at once, and a loop of them alone would keep the writers from the turns they give back
            // (run/writes.ts, SQLITE_SLICE_MS).
            await new Promise((resolve) => setImmediate(resolve));
          }
        })();

        // 50 writers at once: creates, updates by POST and status changes.
        const statuses = [DefinitionStatus.DEPRECATED, DefinitionStatus.ACTIVE];
        const writes = Array.from({ length: 50 }, (_, i) => {
          const target = seeded[i % seeded.length]!;
          if (i % 3 === 0) return save(repo, definition({ name: `Busy new ${i}` }), tenant).then((s) => [s.stored]);
          if (i % 3 === 1)
            return save(repo, definition({ name: `Busy ${i % 10}`, description: `update ${i}` }), tenant).then((s) => [
              s.stored,
            ]);
          return setStatus(tenant, target.stored.id, statuses[i % 2]!).then((s) => s.data);
        });
        const answered = (await Promise.all(writes)).flat();
        writing = false;
        await reader;

        const log = await changes(tenant, start);
        expect(gaps).toEqual([]);
        expect(polls).toBeGreaterThan(1);
        // 50 writes, one version each: gap-free from the counter's start, one record per revision.
        expect(log.map((c) => c.revision)).toEqual(Array.from({ length: 50 }, (_, i) => start + i + 1));
        expect(await counter(tenant)).toBe(start + 50);
        expect(seen).toBe(start + 50);
        // Each answer shows the revision its write took, and each revision is one write's.
        expect(new Set(answered.map((d) => d.modRevision)).size).toBe(50);
        for (const d of answered) expect(log.find((c) => c.revision === d.modRevision)?.definition_id).toBe(d.id);
        // Every version's mod_revision is the revision of its last change.
        const last = new Map<string, number>();
        for (const change of await changes(tenant)) last.set(change.definition_id, change.revision);
        expect(await modRevisions(tenant)).toEqual(Object.fromEntries(last));
      },
    );
  });
});
