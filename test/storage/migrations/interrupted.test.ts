/**
 * A start that dies inside a migration leaves what the migration had done so
 * far and no record of it (MySQL commits each DDL statement on its own), and
 * the next start runs the migration again from its beginning: it must
 * complete, and leave what one uninterrupted run leaves (issue 21, item 2).
 *
 * The interruption is real: migration 0009 is run by hand on a handle whose
 * second statement of DDL fails, after its first one (CREATE TABLE
 * definition_terms) has run; then the next start migrates to the latest.
 */
import type { Knex } from "knex";
import { describe, expect, it } from "vitest";
import { migrations } from "../../../src/storage/migrations/index.js";
import { openDatabase } from "../../../src/storage/run/connection.js";
import { createSqlRepository } from "../../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../../support/databases.js";
import { definition, newId, withIds } from "../fixtures.js";
import { migrateToJustBefore, rows, schemaNames, seedDefinitionsAt0008 } from "./steps.js";

/** `db`, whose statements of DDL fail from the first one after its first CREATE TABLE has run. */
function dyingAfterFirstCreate(db: Knex): Knex {
  let created = false;
  return new Proxy(db, {
    get(target, property, receiver) {
      if (property !== "raw") return Reflect.get(target, property, receiver);
      return (sql: string, ...rest: unknown[]) => {
        if (created && /^\s*(CREATE|ALTER|DROP|SET)\b/i.test(sql))
          return Promise.reject(new Error("the process died here"));
        if (/^\s*CREATE TABLE\b/i.test(sql)) created = true;
        return (target.raw as (...args: unknown[]) => unknown)(sql, ...rest);
      };
    },
  });
}

async function tables(db: Knex): Promise<string[]> {
  const names =
    db.client.dialect === "mysql"
      ? await rows<{ name: string }>(
          db,
          "SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()",
        )
      : await rows<{ name: string }>(db, "SELECT name FROM sqlite_master WHERE type = 'table'");
  return names.map((row) => row.name).sort();
}

forEachDatabase((db) => {
  describe("a start after one that died inside migration 0009", () => {
    const interrupted = useFreshDatabase(db);
    const clean = useFreshDatabase(db);

    it("runs it again to the end, as one uninterrupted run would have", async () => {
      const seeded = [1, 2, 3].map((seq) => ({
        seq,
        tenant: "default",
        def: withIds(definition({ name: `Agent ${seq}`, description: "the quick fox" }), newId(), `x-${seq}`),
      }));
      for (const target of [interrupted(), clean()]) {
        const direct = await openDatabase(target);
        try {
          await migrateToJustBefore(direct.db, "0009-add-search-index");
          await seedDefinitionsAt0008(direct.db, seeded);
        } finally {
          await direct.db.destroy();
        }
      }

      const dying = await openDatabase(interrupted());
      try {
        const addSearchIndex = migrations.find((m) => m.name === "0009-add-search-index")!;
        await expect(addSearchIndex.up(dyingAfterFirstCreate(dying.db))).rejects.toThrow("the process died here");
        expect(await tables(dying.db)).toContain("definition_terms");
      } finally {
        await dying.db.destroy();
      }

      for (const target of [interrupted(), clean()]) await (await createSqlRepository(target)).close();

      const [after, expected] = [await openDatabase(interrupted()), await openDatabase(clean())];
      try {
        expect(await tables(after.db)).toEqual(await tables(expected.db));
        for (const table of ["agent_definitions", "definition_terms"])
          expect(await schemaNames(after.db, table)).toEqual(await schemaNames(expected.db, table));
        const counts = "SELECT tenant, status, is_latest, shard, n FROM definition_counts ORDER BY shard";
        expect(await rows(after.db, counts)).toEqual(await rows(expected.db, counts));
        const terms = "SELECT seq, kind, value FROM definition_terms ORDER BY seq, kind, value";
        expect(await rows(after.db, terms)).toEqual(await rows(expected.db, terms));
        expect((await rows(after.db, terms)).length).toBeGreaterThan(0);
        const once = "SELECT name FROM knex_migrations GROUP BY name HAVING COUNT(*) > 1";
        expect(await rows(after.db, once)).toEqual([]);
        const names = await rows<{ name: string }>(after.db, "SELECT name FROM knex_migrations ORDER BY id");
        expect(names.map((row) => row.name)).toEqual(migrations.map((m) => m.name));
      } finally {
        await after.db.destroy();
        await expected.db.destroy();
      }
    });
  });
});
