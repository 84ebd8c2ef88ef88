/**
 * Migration 0016 on MariaDB: definition_text gains text_revision, set to each
 * version's mod_revision (0015), its rows and FULLTEXT index kept; undone, the
 * column goes. On SQLite it changes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database, openDatabase } from "../../../src/storage/run/connection.js";
import { forEachDatabase, useFreshDatabase } from "../../support/databases.js";
import { definition, newId, withIds } from "../fixtures.js";
import { migrateDown, migrateToJustBefore, migrateUp, rows, schemaNames, seedDefinitionsAt0008 } from "./steps.js";

const migration = "0016-add-text-revision";

forEachDatabase((db) => {
  const fresh = useFreshDatabase(db);
  let direct: Database;

  beforeAll(async () => {
    direct = await openDatabase(fresh());
  });
  afterAll(async () => {
    await direct?.db.destroy();
  });

  describe(`migration ${migration}`, () => {
    it("gives MariaDB's texts their version's mod_revision, keeps the FULLTEXT index, drops it undone", async () => {
      await migrateToJustBefore(direct.db, migration);
      await seedDefinitionsAt0008(direct.db, [
        { seq: 1, tenant: "default", def: withIds(definition({ name: "Quasar" }), newId(), "Agent_ID=AGENT-1") },
        { seq: 2, tenant: "default", def: withIds(definition({ name: "Pulsar" }), newId(), "Agent_ID=AGENT-2") },
      ]);
      const mariadb = db.name === "mariadb";
      const table = mariadb ? "definition_text" : "definition_fts";
      const columns = async () => Object.keys(await direct.db(table).columnInfo());
      if (!mariadb) {
        const before = await columns();
        await migrateUp(direct.db, migration);
        expect(await columns()).toEqual(before);
        return;
      }
      // 0009's backfill is what wrote the seeded rows' texts and 0015's their revisions; the seeding here is raw.
      await direct.db.raw(
        "INSERT INTO definition_text (seq, tenant, status, is_latest, body) " +
          "VALUES (1, 'default', 'ACTIVE', 1, 'quasar'), (2, 'default', 'ACTIVE', 1, 'pulsar')",
      );
      await direct.db.raw("UPDATE agent_definitions SET mod_revision = seq + 6");

      await migrateUp(direct.db, migration);
      expect(await columns()).toContain("text_revision");
      expect(
        await rows<{ seq: number; body: string; text_revision: number }>(
          direct.db,
          "SELECT seq, body, text_revision FROM definition_text ORDER BY seq",
        ),
      ).toEqual([
        { seq: 1, body: "quasar", text_revision: 7 },
        { seq: 2, body: "pulsar", text_revision: 8 },
      ]);
      expect((await schemaNames(direct.db, table)).indexes.sort()).toEqual(["PRIMARY", "ft_definition_text_body"]);
      const found = await rows<{ seq: number }>(
        direct.db,
        "SELECT seq FROM definition_text WHERE MATCH (body) AGAINST ('pulsar' IN BOOLEAN MODE)",
      );
      expect(found.map((row) => Number(row.seq))).toEqual([2]);

      await migrateDown(direct.db, migration);
      expect(await columns()).not.toContain("text_revision");
    });
  });
});
