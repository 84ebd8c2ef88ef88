/**
 * Migration 0017 on a database seeded as 0016 left it: definition_term_counts gains `v`, 0 on the rows there,
 * and from then on every insert, update and delete of a term row adds 1 to the `v` of each counter row it
 * moves, `n` moving as before; undone, the column goes and the triggers count `n` as 0010 made them.
 * counted-totals.test.ts checks what the searches make of it.
 */
import { describe, expect, it } from "vitest";
import { openDatabase } from "../../../src/storage/run/connection.js";
import { forEachDatabase, useFreshDatabase } from "../../support/databases.js";
import { definition, newId, withIds } from "../fixtures.js";
import { migrateDown, migrateToJustBefore, migrateUp, rows, schemaNames, seedDefinitionsAt0008 } from "./steps.js";

const migration = "0017-add-term-versions";

interface Counter {
  readonly status: string;
  readonly n: number;
  readonly v?: number;
}

forEachDatabase((db) => {
  const older = useFreshDatabase(db);

  describe(`migration ${migration}`, () => {
    it("starts every counter row's version at 0, moves it with every term row's change, and goes undone", async () => {
      const direct = await openDatabase(older());
      try {
        await migrateToJustBefore(direct.db, migration);
        await seedDefinitionsAt0008(direct.db, [
          { seq: 1, tenant: "default", def: withIds(definition({ name: "Quasar" }), newId(), "Agent_ID=AGENT-1") },
          { seq: 2, tenant: "default", def: withIds(definition({ name: "Pulsar" }), newId(), "Agent_ID=AGENT-2") },
        ]);
        const term = (seq: number) => ({
          seq,
          tenant: "default",
          kind: 5,
          value: "amber",
          status: "ACTIVE",
          is_latest: 1,
        });
        // Through 0010's triggers: n moves.
        await direct.db("definition_terms").insert([term(1), term(2)]);
        const before = await schemaNames(direct.db, "definition_terms");
        const counters = async (withVersion: boolean) =>
          (
            await rows<Counter>(
              direct.db,
              `SELECT status, n${withVersion ? ", v" : ""} FROM definition_term_counts ` +
                "WHERE tenant = 'default' AND kind = 5 AND value = 'amber' ORDER BY shard, status",
            )
          ).map((c) => ({ ...c, n: Number(c.n), ...(c.v === undefined ? {} : { v: Number(c.v) }) }));
        // seq 1 and seq 2 are in shards 1 and 2.
        expect(await counters(false)).toEqual([
          { status: "ACTIVE", n: 1 },
          { status: "ACTIVE", n: 1 },
        ]);

        await migrateUp(direct.db, migration);
        expect(await counters(true)).toEqual([
          { status: "ACTIVE", n: 1, v: 0 },
          { status: "ACTIVE", n: 1, v: 0 },
        ]);
        // An update moves the old row's counter and the new row's (a new counter row starts at 1), a delete its own.
        await direct.db("definition_terms").where({ seq: 1, kind: 5, value: "amber" }).update({ status: "DEPRECATED" });
        await direct.db("definition_terms").where({ seq: 2, kind: 5, value: "amber" }).delete();
        await direct.db("definition_terms").insert(term(2));
        expect(await counters(true)).toEqual([
          { status: "ACTIVE", n: 0, v: 1 },
          { status: "DEPRECATED", n: 1, v: 1 },
          { status: "ACTIVE", n: 1, v: 2 },
        ]);
        expect(await schemaNames(direct.db, "definition_terms")).toEqual(before);

        await migrateDown(direct.db, migration);
        expect(Object.keys(await direct.db("definition_term_counts").columnInfo())).not.toContain("v");
        expect(await schemaNames(direct.db, "definition_terms")).toEqual(before);
        await direct.db("definition_terms").where({ seq: 1, kind: 5, value: "amber" }).delete();
        expect(await counters(false)).toEqual([
          { status: "ACTIVE", n: 0 },
          { status: "DEPRECATED", n: 0 },
          { status: "ACTIVE", n: 1 },
        ]);
      } finally {
        await direct.db.destroy();
      }
    });

    it("completes when run again after a run that died before its triggers", async () => {
      const direct = await openDatabase(older());
      try {
        // The previous test left the database migrated to 0016 again (undone); a column added by a run that died.
        const mysql = db.name === "mariadb";
        await direct.db.raw(
          `ALTER TABLE definition_term_counts ADD COLUMN v ${mysql ? "BIGINT" : "INTEGER"} NOT NULL DEFAULT 0`,
        );
        await migrateUp(direct.db, migration);
        const cedar = { seq: 2, tenant: "default", kind: 5, value: "cedar", status: "ACTIVE", is_latest: 1 };
        await direct.db("definition_terms").insert(cedar);
        await direct.db("definition_terms").where({ seq: 2, kind: 5, value: "cedar" }).delete();
        const [row] = await rows<{ n: number; v: number }>(
          direct.db,
          "SELECT n, v FROM definition_term_counts WHERE tenant = 'default' AND kind = 5 AND value = 'cedar'",
        );
        expect({ n: Number(row?.n), v: Number(row?.v) }).toEqual({ n: 0, v: 2 });
      } finally {
        await direct.db.destroy();
      }
    });
  });
});
