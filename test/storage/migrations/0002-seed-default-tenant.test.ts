/**
 * Migration 0002 on a database 0001 left: it sets up the tenant `default`
 * with the agent id prefix `AGENT-` (the values it shipped with, written here
 * as literals, not the runtime's defaultTenant), leaves any other tenant as
 * it was, and takes only `default` away again when it is undone.
 */
import { describe, expect, it } from "vitest";
import { openDatabase } from "../../../src/storage/run/connection.js";
import { forEachDatabase, useFreshDatabase } from "../../support/databases.js";
import { migrateDown, migrateToJustBefore, migrateUp } from "./steps.js";

const migration = "0002-seed-default-tenant";

/** The tenants as rows, by name. */
async function tenants(db: Awaited<ReturnType<typeof openDatabase>>["db"]) {
  const rows = (await db("tenants").select("name", "sequence_prefix", "next_agent_number").orderBy("name")) as Array<{
    name: string;
    sequence_prefix: string | null;
    next_agent_number: number | string;
  }>;
  return rows.map((row) => ({ ...row, next_agent_number: Number(row.next_agent_number) }));
}

forEachDatabase((db) => {
  const older = useFreshDatabase(db);

  describe(`migration ${migration}`, () => {
    it(
      "sets up the tenant default with the prefix AGENT-, " + "beside the tenants there are, and takes it away again",
      async () => {
        const direct = await openDatabase(older());
        try {
          await migrateToJustBefore(direct.db, migration);
          await direct.db("tenants").insert({ name: "acme", sequence_prefix: null, next_agent_number: 7 });
          const before = [{ name: "acme", sequence_prefix: null, next_agent_number: 7 }];

          await migrateUp(direct.db, migration);
          expect(await tenants(direct.db)).toEqual([
            ...before,
            { name: "default", sequence_prefix: "AGENT-", next_agent_number: 1 },
          ]);

          await migrateDown(direct.db, migration);
          expect(await tenants(direct.db)).toEqual(before);
        } finally {
          await direct.db.destroy();
        }
      },
    );
  });
});
