/**
 * Migration 0015 on a database seeded as 0014 left it: the definitions stored
 * before it get revisions 1..n per tenant in the order they were last written,
 * one ADDED change record each, and each tenant its counter (0 for one without
 * definitions); run again after a run that died halfway, it ends the same;
 * undone, its tables and column go.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrateToLatest } from "../../../src/storage/migrations/index.js";
import { type Database, openDatabase } from "../../../src/storage/run/connection.js";
import { createSqlRepository } from "../../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../../support/databases.js";
import { definition, newId, save, withIds } from "../fixtures.js";
import { migrateDown, migrateToJustBefore, migrateUp, type SeededDefinition, seedDefinitionsAt0008 } from "./steps.js";

const migration = "0015-add-revisions";

/** Seven definitions over two tenants, seq 1..7; "other" gets seqs 3 and 6. */
const seeded: SeededDefinition[] = Array.from({ length: 7 }, (_, i) => {
  const seq = i + 1;
  const tenant = seq === 3 || seq === 6 ? "other" : "default";
  const prefix = tenant === "other" ? "O-" : "AGENT-";
  return { seq, tenant, def: withIds(definition({ name: `Agent ${seq}` }), newId(), `Agent_ID=${prefix}${seq}`) };
});

/** When each was last written: not in seq order, and seq 4 and 5 at the same instant (seq decides). */
const updatedAt: Record<number, string> = {
  1: "2024-03-01 00:00:00.000",
  2: "2024-01-01 00:00:00.000",
  3: "2024-05-01 00:00:00.000",
  4: "2024-02-01 00:00:00.000",
  5: "2024-02-01 00:00:00.000",
  6: "2024-04-01 00:00:00.000",
  7: "2024-01-15 00:00:00.000",
};

/** The revisions 0015 gives: per tenant, by updated_at then seq. */
const expected: Record<number, number> = { 2: 1, 7: 2, 4: 3, 5: 4, 1: 5, 6: 1, 3: 2 };

forEachDatabase((db) => {
  const older = useFreshDatabase(db);
  let direct: Database;

  beforeAll(async () => {
    direct = await openDatabase(older());
  });
  afterAll(async () => {
    await direct?.db.destroy();
  });

  /** What 0015 made, as plain values. */
  async function state() {
    const definitions = (await direct.db("agent_definitions").select("seq", "mod_revision").orderBy("seq")) as Array<{
      seq: number | string;
      mod_revision: number | string;
    }>;
    const changes = (await direct
      .db("definition_changes")
      .select("tenant", "revision", "kind", "definition_id", "agent_number", "changed_at")
      .orderBy(["tenant", "revision"])) as Array<Record<string, unknown>>;
    const counters = (await direct.db("tenant_revisions").select("tenant", "revision").orderBy("tenant")) as Array<{
      tenant: string;
      revision: number | string;
    }>;
    return {
      revisions: Object.fromEntries(definitions.map((d) => [Number(d.seq), Number(d.mod_revision)])),
      changes: changes.map((c) => ({
        tenant: c.tenant,
        revision: Number(c.revision),
        kind: c.kind,
        definition_id: c.definition_id,
        agent_number: Number(c.agent_number),
        // MySQL answers DATETIME(3) with its milliseconds, SQLite the text as written.
        changed_at: String(c.changed_at).replace(/\.000$/, ""),
      })),
      counters: Object.fromEntries(counters.map((c) => [c.tenant, Number(c.revision)])),
    };
  }

  describe(`migration ${migration}`, () => {
    it("numbers the definitions stored before it per tenant by when they were last written, and undoes", async () => {
      await migrateToJustBefore(direct.db, migration);
      await direct.db("tenants").insert({
        name: "other",
        sequence_prefix: "O-",
        next_agent_number: 8,
        created_at: "2024-01-01 00:00:00.000",
      });
      await direct.db("tenants").insert({
        name: "empty",
        sequence_prefix: null,
        next_agent_number: 1,
        created_at: "2024-01-01 00:00:00.000",
      });
      await seedDefinitionsAt0008(direct.db, seeded);
      for (const [seq, at] of Object.entries(updatedAt))
        await direct
          .db("agent_definitions")
          .where({ seq: Number(seq) })
          .update({ updated_at: at });

      await migrateUp(direct.db, migration);
      const made = await state();
      expect(made.revisions).toEqual(expected);
      expect(made.counters).toEqual({ default: 5, other: 2, empty: 0 });
      const bySeq = new Map(seeded.map((s) => [s.seq, s]));
      const record = (seq: number) => ({
        tenant: bySeq.get(seq)?.tenant,
        revision: expected[seq],
        kind: "ADDED",
        definition_id: bySeq.get(seq)?.def.id,
        agent_number: seq,
        changed_at: updatedAt[seq]?.replace(/\.000$/, ""),
      });
      expect(made.changes).toEqual([2, 7, 4, 5, 1, 6, 3].map(record));

      // A run that died halfway (its tables and column made, its rows partly written, no record of it in
      // knex_migrations) is run again from its start on the next start, and ends the same.
      await direct.db("definition_changes").where({ tenant: "default" }).delete();
      await direct.db("agent_definitions").where({ tenant: "other" }).update({ mod_revision: 0 });
      await direct.db("knex_migrations").where({ name: migration }).delete();
      await migrateUp(direct.db, migration);
      expect(await state()).toEqual(made);

      /** The names of the database's stored procedures (MySQL: 0015 makes one; SQLite has none). */
      const procedures = async () =>
        db.name === "mariadb"
          ? ((await direct.db.raw("SHOW PROCEDURE STATUS WHERE Db = DATABASE()")) as [Array<{ Name: string }>])[0].map(
              (row) => row.Name,
            )
          : [];
      expect(await procedures()).toEqual(db.name === "mariadb" ? ["asor_commit_revisions"] : []);
      await migrateDown(direct.db, migration);
      expect(await procedures()).toEqual([]);
      expect(await direct.db.schema.hasTable("definition_changes")).toBe(false);
      expect(await direct.db.schema.hasTable("tenant_revisions")).toBe(false);
      expect(await direct.db.schema.hasColumn("agent_definitions", "mod_revision")).toBe(false);

      // Up again, then the runtime's writes go on from each tenant's counter.
      await migrateToLatest(direct.db);
      const repo = await createSqlRepository(older());
      try {
        const next = await save(repo, definition({ name: "After 0015" }), "other");
        expect(next.stored.modRevision).toBe(3);
        expect((await repo.get("default", bySeq.get(1)?.def.id ?? ""))?.modRevision).toBe(5);
      } finally {
        await repo.close();
      }
    });
  });
});
