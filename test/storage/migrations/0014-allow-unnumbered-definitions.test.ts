/**
 * Migration 0014 on a database seeded as 0013 left it: on MySQL
 * agent_definitions.agent_number becomes nullable (a row is staged with no
 * agent inside the transaction that creates it: write-transaction.ts
 * prepareInsert), its foreign key to tenants goes, and the definitions keep
 * their numbers; undone, both are back; run twice it changes them once; on
 * SQLite it changes nothing.
 */
import { describe, expect, it } from "vitest";
import { allowUnnumberedDefinitions } from "../../../src/storage/migrations/0014-allow-unnumbered-definitions.js";
import { openDatabase } from "../../../src/storage/run/connection.js";
import { forEachDatabase, useFreshDatabase } from "../../support/databases.js";
import { definition, newId, withIds } from "../fixtures.js";
import { migrateDown, migrateToJustBefore, migrateUp, type SeededDefinition, seedDefinitionsAt0008 } from "./steps.js";

const migration = "0014-allow-unnumbered-definitions";

const seeded: SeededDefinition[] = Array.from({ length: 3 }, (_, i) => ({
  seq: i + 1,
  tenant: "default",
  def: withIds(definition({ name: `Agent ${i + 1}` }), newId(), `Agent_ID=AGENT-${i + 1}`),
}));

forEachDatabase((db) => {
  const older = useFreshDatabase(db);

  describe(`migration ${migration}`, () => {
    it("lets agent_number be NULL and drops its key to tenants on MySQL (not SQLite), and undoes it", async () => {
      const direct = await openDatabase(older());
      try {
        await migrateToJustBefore(direct.db, migration);
        await seedDefinitionsAt0008(direct.db, seeded);
        const nullable = async () =>
          (await direct.db("agent_definitions").columnInfo("agent_number")).nullable as boolean;
        const numbers = async () =>
          (
            (await direct.db("agent_definitions").select("agent_number").orderBy("seq")) as Array<{
              agent_number: number | string;
            }>
          ).map((r) => Number(r.agent_number));
        const tenantKeys = async () =>
          direct.dialect === "mysql"
            ? (
                (await direct.db.raw(
                  "SELECT CONSTRAINT_NAME AS name FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE " +
                    "CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'agent_definitions' AND " +
                    "REFERENCED_TABLE_NAME = 'tenants'",
                )) as [Array<{ name: string }>]
              )[0].map((r) => r.name)
            : ((await direct.db.raw("PRAGMA foreign_key_list(agent_definitions)")) as Array<{ table: string }>)
                .filter((k) => k.table === "tenants")
                .map(() => "fk_agent_definitions_tenant");
        expect(await nullable()).toBe(false);
        expect(await tenantKeys()).toEqual(["fk_agent_definitions_tenant"]);

        await migrateUp(direct.db, migration);
        // Run again, as after a start that died once the ALTER had committed: nothing more happens.
        await allowUnnumberedDefinitions.up(direct.db);
        expect(await nullable()).toBe(direct.dialect === "mysql");
        expect(await tenantKeys()).toEqual(direct.dialect === "mysql" ? [] : ["fk_agent_definitions_tenant"]);
        expect(await numbers()).toEqual([1, 2, 3]);

        await migrateDown(direct.db, migration);
        expect(await nullable()).toBe(false);
        expect(await tenantKeys()).toEqual(["fk_agent_definitions_tenant"]);
        expect(await numbers()).toEqual([1, 2, 3]);
      } finally {
        await direct.db.destroy();
      }
    });
  });
});
