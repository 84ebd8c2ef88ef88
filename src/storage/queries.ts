/**
 * One function per query. Each takes the connection or transaction to run on
 * explicitly (`{ tx }`), so a caller can see what runs inside a transaction.
 */
import type { Knex } from "knex";
import type { Dialect } from "./connection.js";
import type { AgentDefinitionRow, NewAgentDefinitionRow } from "./rows.js";
import type { UpsertKey } from "./repository.js";

/** Where a query runs. */
export interface QueryContext {
  readonly tx: Knex | Knex.Transaction;
  readonly dialect: Dialect;
}

const definitions = "agent_definitions";
const columns: string[] = ["id", "seq", "tenant", "name", "provider_id", "version", "document", "created_at", "updated_at"];

/** True when the tenant row exists. */
export async function tenantExists({ tx }: QueryContext, tenant: string): Promise<boolean> {
  const row: unknown = await tx("tenants").select("name").where({ name: tenant }).first();
  return row !== undefined;
}

/**
 * The row holding `key`, locked for the rest of the transaction on MySQL.
 * When no row holds it, InnoDB takes a gap lock instead, so two creators of
 * one key deadlock or collide on the unique index and one of them retries.
 * SQLite needs no lock: its transactions on our single connection run one at a time.
 */
export async function findByKeyForUpdate({ tx, dialect }: QueryContext, tenant: string, key: UpsertKey): Promise<AgentDefinitionRow | undefined> {
  const query = tx(definitions)
    .select(columns)
    .where({ tenant, name: key.name, provider_id: key.providerId, version: key.version });
  // knex warns on every forUpdate() against SQLite, so only ask where it means something.
  if (dialect === "mysql") query.forUpdate();
  return (await query.first()) as AgentDefinitionRow | undefined;
}

/** The row with this id in this tenant. */
export async function findById({ tx }: QueryContext, tenant: string, id: string): Promise<AgentDefinitionRow | undefined> {
  return (await tx(definitions).select(columns).where({ tenant, id }).first()) as AgentDefinitionRow | undefined;
}

/** Inserts a new row. No `returning()`: MySQL has none, and the caller knows every value. */
export async function insertDefinition({ tx, dialect }: QueryContext, row: NewAgentDefinitionRow): Promise<void> {
  // MySQL assigns seq by AUTO_INCREMENT; SQLite only auto-increments a primary key,
  // and its single writer makes MAX + 1 race-free (the unique index guards it anyway).
  const seq = dialect === "sqlite" ? { seq: tx.raw(`(SELECT COALESCE(MAX(seq), 0) + 1 FROM ${definitions})`) } : {};
  await tx(definitions).insert({ ...row, ...seq });
}

/** Replaces the document of an existing row; its id, key and creation time stay. */
export async function updateDocument({ tx }: QueryContext, tenant: string, id: string, document: string, updatedAt: string): Promise<void> {
  const count = await tx(definitions).where({ tenant, id }).update({ document, updated_at: updatedAt });
  if (count !== 1) throw new Error(`Expected to update one agent definition row, updated ${count}.`);
}

/** How many definitions the tenant has. */
export async function countByTenant({ tx }: QueryContext, tenant: string): Promise<number> {
  const row = (await tx(definitions).where({ tenant }).count({ total: "*" }).first()) as { total: number | string | bigint } | undefined;
  // mysql2 answers COUNT(*) as a number or, for BIGINT with supportBigNumbers, possibly a string.
  return Number(row?.total ?? 0);
}

/** A page of the tenant's rows in insertion order. */
export async function listByTenant({ tx }: QueryContext, tenant: string, limit: number, offset: number): Promise<AgentDefinitionRow[]> {
  return (await tx(definitions)
    .select(columns)
    .where({ tenant })
    .orderBy("seq", "asc")
    .limit(limit)
    .offset(offset)) as AgentDefinitionRow[];
}
