/**
 * The lifecycle columns against the real databases: migration 0008's
 * backfill, the latest flag under concurrent writers of one agent, status
 * changes that roll back whole, and what `Agent_ID=` and the list see.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { unfilteredQuery } from "../../src/domain/list-query.js";
import { migrationSource, migrations } from "../../src/storage/migrations/index.js";
import type { AgentDefinitionRepository, StoredDefinition } from "../../src/storage/repository.js";
import { encodeDefinition } from "../../src/storage/rows.js";
import type { Database } from "../../src/storage/run/connection.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { definition, newId, save, withIds } from "./fixtures.js";

const tenant = "default";

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  let raw: Database;

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    raw = await openDatabase(target());
  });

  afterAll(async () => {
    await repo?.close();
    await raw?.db.destroy();
  });

  /** The ids of the agent's versions whose latest flag is set, as stored. */
  const latestOf = async (agentNumber: number): Promise<string[]> =>
    (
      await raw
        .db("agent_definitions")
        .select("id")
        .where({ tenant, agent_number: agentNumber })
        .andWhere("is_latest", 1)
    ).map((r: { id: string }) => r.id);

  /** The agent's versions, newest first, as the versions list answers them. */
  const versionsOf = async (agentNumber: number): Promise<StoredDefinition[]> => [
    ...(await repo.listVersions(tenant, agentNumber, { limit: 100, offset: 0 })).items,
  ];

  it("keeps exactly one latest version per agent while many writers add versions to it at once", async () => {
    const name = `Crowded ${db.name}`;
    const first = await save(repo, definition({ name, version: "0" }));
    const agent = first.stored.agent.number;
    const saved = await Promise.all(
      Array.from({ length: 12 }, (_, i) => save(repo, definition({ name, version: String(i + 1) }))),
    );
    expect(new Set(saved.map((s) => s.stored.agent.number))).toEqual(new Set([agent]));
    const versions = await versionsOf(agent);
    expect(versions).toHaveLength(13);
    expect(await latestOf(agent)).toEqual([versions[0]?.id]);
    expect(versions.map((v) => v.latest)).toEqual([true, ...Array(12).fill(false)]);
  });

  it("keeps the latest flag right while status changes and new versions race on one agent", async () => {
    const name = `Contended ${db.name}`;
    const first = await save(repo, definition({ name, version: "0" }));
    const agent = first.stored.agent;
    const deactivateAll = () =>
      repo.write(tenant, async (tx) => {
        const versions = await tx.findVersionsForUpdate(agent);
        return tx.setStatus(versions, "DEACTIVATED", null);
      });
    await Promise.all([
      deactivateAll(),
      save(repo, definition({ name, version: "1" })),
      deactivateAll(),
      save(repo, definition({ name, version: "2" })),
    ]);
    const versions = await versionsOf(agent.number);
    const expected = versions.find((v) => v.status !== "DEACTIVATED");
    expect(await latestOf(agent.number)).toEqual(expected === undefined ? [] : [expected.id]);
  });

  it("rolls a status change of every version back whole when its transaction fails", async () => {
    const name = `Atomic ${db.name}`;
    const v1 = await save(repo, definition({ name, version: "1" }));
    await save(repo, definition({ name, version: "2" }));
    const agent = v1.stored.agent;
    const before = await versionsOf(agent.number);
    const failure = await repo
      .write(tenant, async (tx) => {
        await tx.setStatus(await tx.findVersionsForUpdate(agent), "DEACTIVATED", "never");
        throw new Error("the work failed after setting the status");
      })
      .catch((e: unknown) => e);
    expect((failure as Error).message).toMatch(/work failed/);
    expect(await versionsOf(agent.number)).toEqual(before);
  });

  it(
    "resolves Agent_ID= to the newest version not deactivated, else the newest of all; the list leaves " +
      "deactivated ones out",
    async () => {
      const name = `Resolved ${db.name}`;
      const v1 = (await save(repo, definition({ name, version: "1" }))).stored;
      const v2 = (await save(repo, definition({ name, version: "2" }))).stored;
      const reference = v1.agent.referenceId;
      const setStatus = (ids: string[], status: "ACTIVE" | "DEACTIVATED") =>
        repo.write(tenant, async (tx) =>
          tx.setStatus(
            (await tx.findVersionsForUpdate(v1.agent)).filter((v) => ids.includes(v.id)),
            status,
            null,
          ),
        );
      const listed = async () => (await repo.search(tenant, unfilteredQuery(100, 0))).items.map((d) => d.id);
      const totalBefore = (await repo.search(tenant, unfilteredQuery(1, 0))).total;

      const [set] = await setStatus([v2.id], "DEACTIVATED");
      expect(set).toMatchObject({ id: v2.id, status: "DEACTIVATED", revision: 2, latest: false });
      expect((await repo.getNewestByReference(tenant, reference))?.id).toBe(v1.id);
      expect(await listed()).not.toContain(v2.id);
      expect((await repo.search(tenant, unfilteredQuery(1, 0))).total).toBe(totalBefore - 1);
      expect(await repo.get(tenant, v2.id)).toMatchObject({ status: "DEACTIVATED" });

      await setStatus([v1.id], "DEACTIVATED");
      expect((await repo.getNewestByReference(tenant, reference))?.id).toBe(v2.id);
      expect(await latestOf(v1.agent.number)).toEqual([]);

      await setStatus([v1.id], "ACTIVE");
      expect(await repo.getNewestByReference(tenant, reference)).toMatchObject({
        id: v1.id,
        latest: true,
        revision: 3,
      });
    },
  );

  describe("migration 0008", () => {
    const older = useFreshDatabase(db);

    it(
      "makes every existing row ACTIVE, revision 1, its status changed when it was created, latest only on each " +
        "agent's newest",
      async () => {
        const before0008 = migrations.findIndex((m) => m.name.startsWith("0008-"));
        const direct = await openDatabase(older());
        const created = ["2024-01-02 03:04:05.678", "2024-02-03 04:05:06.789", "2024-03-04 05:06:07.891"];
        const ids: string[] = [];
        try {
          await direct.db.migrate.latest({
            migrationSource: { ...migrationSource, getMigrations: async () => migrations.slice(0, before0008) },
            tableName: "knex_migrations",
          });
          expect(await direct.db.schema.hasColumn("agent_definitions", "is_latest")).toBe(false);
          await direct.db("agents").insert([
            {
              tenant,
              number: 1,
              reference_id: "Agent_ID=AGENT-1",
              provider_id: "Provider=Acme",
              name: "Old one",
              created_at: created[0],
            },
            {
              tenant,
              number: 2,
              reference_id: "Agent_ID=AGENT-2",
              provider_id: "Provider=Acme",
              name: "Old two",
              created_at: created[0],
            },
          ]);
          // Agent 1 has three versions (seq 1, 3, 4); agent 2 one (seq 2).
          const rows = [
            { seq: 1, agent: 1, name: "Old one", version: "1", at: created[0] },
            { seq: 2, agent: 2, name: "Old two", version: "1", at: created[0] },
            { seq: 3, agent: 1, name: "Old one", version: "2", at: created[1] },
            { seq: 4, agent: 1, name: "Old one", version: "3", at: created[2] },
          ];
          for (const row of rows) {
            const id = newId();
            ids.push(id);
            const { document, binary } = encodeDefinition(
              withIds(definition({ name: row.name, version: row.version }), id, `Agent_ID=AGENT-${row.agent}`),
            );
            await direct.db("agent_definitions").insert({
              id,
              seq: row.seq,
              tenant,
              name: row.name,
              provider_id: "Provider=Acme",
              version: row.version,
              agent_number: row.agent,
              document,
              document_binary: binary,
              created_at: row.at,
              updated_at: row.at,
            });
          }
          await direct.db("tenants").where({ name: tenant }).update({ next_agent_number: 3 });
        } finally {
          await direct.db.destroy();
        }

        const migrated = await createSqlRepository(older());
        try {
          const read = await Promise.all(ids.map((id) => migrated.get(tenant, id)));
          expect(
            read.map((d) => [
              d?.revision,
              d?.status,
              d?.statusMessage,
              d?.statusChangedAt.getTime() === d?.createdAt.getTime(),
            ]),
          ).toEqual(Array(4).fill([1, "ACTIVE", null, true]));
          expect(read.map((d) => d?.latest)).toEqual([false, true, false, true]);
          expect((await migrated.getNewestByReference(tenant, "Agent_ID=AGENT-1"))?.id).toBe(ids[3]);
          // And the service writes on from there: a new version of agent 1 takes the flag.
          const next = await save(migrated, definition({ name: "Old one", version: "4" }));
          expect(next.stored).toMatchObject({ revision: 1, status: "ACTIVE", latest: true });
          expect((await migrated.get(tenant, ids[3] as string))?.latest).toBe(false);
        } finally {
          await migrated.close();
        }
      },
    );
  });
});
