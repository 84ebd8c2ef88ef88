/**
 * The embedded default tenant, with an agent id sequence generator, so a
 * fresh installation accepts definitions without an admin step. The values
 * are this migration's own (frozen, README.md); the runtime's copy is
 * repository.ts's defaultTenant and defaultSequencePrefix.
 */
import type { Knex } from "knex";
import type { Migration } from "./index.js";

/** The tenant every installation starts with. */
const defaultTenant = "default";

/** The sequence prefix of the default tenant: its agents are `Agent_ID=AGENT-1`, `Agent_ID=AGENT-2`... */
const defaultSequencePrefix = "AGENT-";

export const seedDefaultTenant: Migration = {
  name: "0002-seed-default-tenant",
  async up(db: Knex) {
    // Ignored when there: a run that died after the insert, before knex recorded it, is run again.
    await db("tenants")
      .insert({ name: defaultTenant, sequence_prefix: defaultSequencePrefix })
      .onConflict("name")
      .ignore();
  },
  async down(db: Knex) {
    await db("tenants").where({ name: defaultTenant }).delete();
  },
};
