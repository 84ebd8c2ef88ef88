/**
 * The embedded default tenant, so a fresh installation accepts definitions
 * without an admin step.
 */
import type { Knex } from "knex";
import type { Migration } from "./index.js";

/** The tenant every installation starts with. */
export const defaultTenant = "default";

export const seedDefaultTenant: Migration = {
  name: "0002-seed-default-tenant",
  async up(db: Knex) {
    await db("tenants").insert({ name: defaultTenant });
  },
  async down(db: Knex) {
    await db("tenants").where({ name: defaultTenant }).delete();
  },
};
