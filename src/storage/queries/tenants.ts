/**
 * The tenants' queries: the cold paths (admin, the write's tenant row is in
 * writes.ts), on knex's query builder.
 */
import type { Knex } from "knex";
import type { TenantRow } from "../rows.js";
import type { Dialect } from "../run/connection.js";
import { tenants } from "./tables.js";

/** Where a query outside the write transaction and the hot reads runs: the cold paths (tenants), on knex. */
export interface QueryContext {
  readonly tx: Knex | Knex.Transaction;
  readonly dialect: Dialect;
}

const tenantColumns = ["name", "sequence_prefix", "next_agent_number", "created_at"];

// ---- tenants ----

/** The tenant row, or undefined. */
export async function findTenant({ tx }: QueryContext, name: string): Promise<TenantRow | undefined> {
  return (await tx(tenants).select(tenantColumns).where({ name }).first()) as TenantRow | undefined;
}

/** Every tenant row, by name. */
export async function listTenants({ tx }: QueryContext): Promise<TenantRow[]> {
  return (await tx(tenants).select(tenantColumns).orderBy("name", "asc")) as TenantRow[];
}

/** Inserts a tenant; a duplicate name fails with the driver's duplicate-key error. */
export async function insertTenant({ tx }: QueryContext, row: TenantRow): Promise<void> {
  await tx(tenants).insert(row);
}
