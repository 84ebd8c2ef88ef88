/**
 * Migration 0012 on a database seeded as 0011 left it: on MySQL every agent
 * gets a lock_count of 0, which the writes that lock the agent raise
 * (queries/writes.ts lockAgent), and the column goes again when it is
 * undone; run twice it adds it once; on SQLite it changes nothing.
 */
import { describe, expect, it } from "vitest";
import { addAgentLockCount } from "../../../src/storage/migrations/0012-add-agent-lock-count.js";
import { openDatabase } from "../../../src/storage/run/connection.js";
import { forEachDatabase, useFreshDatabase } from "../../support/databases.js";
import { definition, newId, withIds } from "../fixtures.js";
import { migrateDown, migrateToJustBefore, migrateUp, type SeededDefinition, seedDefinitionsAt0008 } from "./steps.js";

const migration = "0012-add-agent-lock-count";

const seeded: SeededDefinition[] = Array.from({ length: 3 }, (_, i) => ({
  seq: i + 1,
  tenant: "default",
  def: withIds(definition({ name: `Agent ${i + 1}` }), newId(), `Agent_ID=AGENT-${i + 1}`),
}));

forEachDatabase((db) => {
  const older = useFreshDatabase(db);

  describe(`migration ${migration}`, () => {
    it("gives every agent a lock_count of 0 (MySQL; nothing on SQLite), and drops it again", async () => {
      const direct = await openDatabase(older());
      try {
        await migrateToJustBefore(direct.db, migration);
        await seedDefinitionsAt0008(direct.db, seeded);
        const columns = Object.keys(await direct.db("agents").columnInfo()).sort();

        await migrateUp(direct.db, migration);
        // Run again, as after a start that died once the ALTER had committed: nothing more happens.
        await addAgentLockCount.up(direct.db);
        if (direct.dialect === "mysql") {
          const agents = (await direct.db("agents").select("number", "lock_count").orderBy("number")) as Array<{
            number: number | string;
            lock_count: number | string;
          }>;
          expect(agents.map((a) => [Number(a.number), Number(a.lock_count)])).toEqual([
            [1, 0],
            [2, 0],
            [3, 0],
          ]);
        } else {
          expect(Object.keys(await direct.db("agents").columnInfo()).sort()).toEqual(columns);
        }

        await migrateDown(direct.db, migration);
        expect(Object.keys(await direct.db("agents").columnInfo()).sort()).toEqual(columns);
      } finally {
        await direct.db.destroy();
      }
    });
  });
});
