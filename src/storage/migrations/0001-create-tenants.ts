/**
 * The tenants: a definition can only be stored in a tenant that has been set
 * up. Later setup (admin commands, the agent id sequence) adds columns here.
 */
import type { Knex } from "knex";
import { dialectOf, exactCollation } from "./dialect.js";
import type { Migration } from "./index.js";

export const createTenants: Migration = {
  name: "0001-create-tenants",
  async up(db: Knex) {
    const mysql = dialectOf(db) === "mysql";
    const collation = mysql ? await exactCollation(db) : undefined;
    await db.schema.createTable("tenants", (table) => {
      table.comment("Tenants that have been set up; definitions belong to one.");
      const name = table.string("name", 63).notNullable().comment("The tenant name as it appears in the API path; compared exactly.");
      if (collation !== undefined) name.collate(collation);
      table
        .datetime("created_at", { precision: 3 })
        .notNullable()
        // UTC with milliseconds, the format rows.ts reads on both dialects.
        .defaultTo(mysql ? db.raw("CURRENT_TIMESTAMP(3)") : db.raw("(strftime('%Y-%m-%d %H:%M:%f', 'now'))"))
        .comment("When the tenant was set up (UTC).");
      // The string form: knex 3.3 renders the options-object form inline as `[object]` SQL.
      table.primary(["name"], "pk_tenants");
      if (collation !== undefined) {
        table.engine("InnoDB");
        table.charset("utf8mb4");
        table.collate(collation);
      }
    });
  },
  async down(db: Knex) {
    await db.schema.dropTable("tenants");
  },
};
