/**
 * One function per query. Each takes the connection or transaction to run on
 * explicitly (`{ tx }`), so a caller can see what runs inside a transaction.
 *
 * Locking reads (`...ForUpdate`) add FOR UPDATE on MySQL, where write
 * transactions run at READ COMMITTED (see knex-repository.ts): InnoDB locks the
 * rows found until the transaction ends, and takes no gap locks for rows not
 * found; a racing insert of those fails on a unique index instead. SQLite
 * needs no locks: its transactions on our single connection run one at a
 * time, and a transaction of another process that wrote in between makes our
 * first write fail with SQLITE_BUSY, which the repository retries. knex warns
 * on every forUpdate() against SQLite, so it is only asked for where it means
 * something.
 */
import type { Knex } from "knex";
import type { Dialect } from "./connection.js";
import { fromDatabaseInteger } from "./rows.js";
import type { AgentDefinitionRow, AgentExternalIdRow, AgentRow, NewAgentDefinitionRow, TenantRow } from "./rows.js";
import type { UpsertKey } from "./repository.js";

/** Where a query runs. */
export interface QueryContext {
  readonly tx: Knex | Knex.Transaction;
  readonly dialect: Dialect;
}

const tenants = "tenants";
const agents = "agents";
const externalIds = "agent_external_ids";
const definitions = "agent_definitions";

const tenantColumns = ["name", "sequence_prefix", "next_agent_number", "created_at"];
const ownDefinitionColumns = ["id", "seq", "tenant", "name", "provider_id", "version", "agent_number", "document", "created_at", "updated_at"];
const definitionColumns = [
  "d.id",
  "d.seq",
  "d.tenant",
  "d.name",
  "d.provider_id",
  "d.version",
  "d.agent_number",
  "a.reference_id",
  "d.document",
  "d.created_at",
  "d.updated_at",
];

function lockedOnMysql<T extends Knex.QueryBuilder>(query: T, dialect: Dialect): T {
  if (dialect === "mysql") query.forUpdate();
  return query;
}

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

/**
 * Takes the tenant's next agent number: reads it with the row locked (on
 * MySQL; so concurrent creators queue here and see each other's increments)
 * and raises it. The increment rolls back with the transaction, so numbers
 * have no gaps.
 */
export async function takeAgentNumber(
  { tx, dialect }: QueryContext,
  tenant: string,
): Promise<{ number: number; prefix: string | null }> {
  const query = tx(tenants).select(["sequence_prefix", "next_agent_number"]).where({ name: tenant });
  const row = (await lockedOnMysql(query, dialect).first()) as Pick<TenantRow, "sequence_prefix" | "next_agent_number"> | undefined;
  if (row === undefined) throw new Error(`Tenant "${tenant}" vanished inside its own write transaction.`);
  const number = fromDatabaseInteger(row.next_agent_number);
  const count = await tx(tenants).where({ name: tenant, next_agent_number: number }).update({ next_agent_number: number + 1 });
  if (count !== 1) throw new Error(`Expected to raise the agent sequence of tenant "${tenant}" once, raised ${count}.`);
  return { number, prefix: row.sequence_prefix };
}

/**
 * Locks the tenant's agent sequence (its row, on MySQL) until the transaction
 * ends, as every creator of an agent does in takeAgentNumber: while it is
 * held, no other transaction can create an agent in the tenant.
 */
export async function lockAgentSequence({ tx, dialect }: QueryContext, tenant: string): Promise<void> {
  if (dialect !== "mysql") return;
  await tx(tenants).select(["name"]).where({ name: tenant }).forUpdate();
}

// ---- agents ----

/** The agent whose first version had this provider and name, locked on MySQL. */
export async function findAgentByNameForUpdate(
  { tx, dialect }: QueryContext,
  tenant: string,
  providerId: string,
  name: string,
): Promise<Pick<AgentRow, "number" | "reference_id"> | undefined> {
  const query = tx(agents).select(["number", "reference_id"]).where({ tenant, provider_id: providerId, name });
  return (await lockedOnMysql(query, dialect).first()) as Pick<AgentRow, "number" | "reference_id"> | undefined;
}

/** Inserts an agent; a second agent with the same provider and name fails with a duplicate key. */
export async function insertAgent({ tx }: QueryContext, row: AgentRow): Promise<void> {
  await tx(agents).insert(row);
}

// ---- external ids ----

/** The number of the agent holding this externalAgentID for this provider, locked on MySQL. */
export async function findExternalIdOwnerForUpdate(
  { tx, dialect }: QueryContext,
  tenant: string,
  providerId: string,
  externalAgentId: string,
): Promise<Pick<AgentExternalIdRow, "agent_number"> | undefined> {
  const query = tx(externalIds).select(["agent_number"]).where({ tenant, provider_id: providerId, external_agent_id: externalAgentId });
  return (await lockedOnMysql(query, dialect).first()) as Pick<AgentExternalIdRow, "agent_number"> | undefined;
}

/** Records a claim; a claim of the same externalAgentID fails with a duplicate key. */
export async function insertExternalId({ tx }: QueryContext, row: AgentExternalIdRow): Promise<void> {
  await tx(externalIds).insert(row);
}

// ---- definitions ----

/** Definitions joined with their agents, as `d` and `a`. */
function definitionsWithAgents(tx: Knex | Knex.Transaction): Knex.QueryBuilder {
  return tx({ d: definitions })
    .join({ a: agents }, function joinAgent() {
      this.on("a.tenant", "=", "d.tenant").andOn("a.number", "=", "d.agent_number");
    })
    .select(definitionColumns);
}

/**
 * The row holding `key`, locked on MySQL. Only the definition row is locked,
 * not its agent (a locking join would lock both, and a creator of a version
 * locks the agent first and then the key's index entry: a deadlock). Agents
 * never change once written, so reading the reference id unlocked is exact.
 * When no row holds the key nothing is locked under READ COMMITTED: a racing
 * insert of the same key fails on the unique index and its work runs again.
 */
export async function findByKeyForUpdate({ tx, dialect }: QueryContext, tenant: string, key: UpsertKey): Promise<AgentDefinitionRow | undefined> {
  const query = tx(definitions)
    .select(ownDefinitionColumns)
    .where({ tenant, name: key.name, provider_id: key.providerId, version: key.version });
  const row = (await lockedOnMysql(query, dialect).first()) as Omit<AgentDefinitionRow, "reference_id"> | undefined;
  if (row === undefined) return undefined;
  const agent = (await tx(agents).select(["reference_id"]).where({ tenant, number: row.agent_number }).first()) as
    | Pick<AgentRow, "reference_id">
    | undefined;
  if (agent === undefined) throw new Error(`Agent ${String(row.agent_number)} of definition ${row.id} is missing.`);
  return { ...row, reference_id: agent.reference_id };
}

/** The row with this id in this tenant. */
export async function findById({ tx }: QueryContext, tenant: string, id: string): Promise<AgentDefinitionRow | undefined> {
  return (await definitionsWithAgents(tx).where({ "d.tenant": tenant, "d.id": id }).first()) as AgentDefinitionRow | undefined;
}

/** The newest row (highest seq) of the agent with this reference id. */
export async function findNewestByReference({ tx }: QueryContext, tenant: string, referenceId: string): Promise<AgentDefinitionRow | undefined> {
  return (await definitionsWithAgents(tx)
    .where({ "a.tenant": tenant, "a.reference_id": referenceId })
    .orderBy("d.seq", "desc")
    .first()) as AgentDefinitionRow | undefined;
}

/** Inserts a new row. No `returning()`: MySQL has none, and the caller knows every value. */
export async function insertDefinition({ tx, dialect }: QueryContext, row: NewAgentDefinitionRow): Promise<void> {
  // MySQL assigns seq by AUTO_INCREMENT; SQLite only auto-increments a primary key,
  // and its single writer makes MAX + 1 race-free (the unique index guards it anyway).
  const seq = dialect === "sqlite" ? { seq: tx.raw(`(SELECT COALESCE(MAX(seq), 0) + 1 FROM ${definitions})`) } : {};
  await tx(definitions).insert({ ...row, ...seq });
}

/** Replaces the document of an existing row; its id, key, agent and creation time stay. */
export async function updateDocument({ tx }: QueryContext, tenant: string, id: string, document: string, updatedAt: string): Promise<void> {
  const count = await tx(definitions).where({ tenant, id }).update({ document, updated_at: updatedAt });
  if (count !== 1) throw new Error(`Expected to update one agent definition row, updated ${count}.`);
}

/** How many definitions the tenant has (of one agent, when `agentNumber` is given). */
export async function countDefinitions({ tx }: QueryContext, tenant: string, agentNumber?: number): Promise<number> {
  const query = tx(definitions).where({ tenant });
  if (agentNumber !== undefined) query.andWhere({ agent_number: agentNumber });
  const row = (await query.count({ total: "*" }).first()) as { total: number | string | bigint } | undefined;
  // mysql2 answers COUNT(*) as a number or, for BIGINT with supportBigNumbers, possibly a string.
  return Number(row?.total ?? 0);
}

/** A page of the tenant's rows in insertion order. */
export async function listByTenant({ tx }: QueryContext, tenant: string, limit: number, offset: number): Promise<AgentDefinitionRow[]> {
  // The page's ids come from the (tenant, seq) index alone; only those rows are then read
  // and joined. OFFSET over the joined rows made MariaDB read and sort whole documents:
  // 16 s for the last page of 100,000 definitions (BENCHMARKS.md).
  const page = tx(definitions).select("id").where({ tenant }).orderBy("seq", "asc").limit(limit).offset(offset).as("p");
  return (await definitionsWithAgents(tx).join(page, "p.id", "d.id").orderBy("d.seq", "asc")) as AgentDefinitionRow[];
}

/** A page of one agent's rows, newest first. */
export async function listByAgent({ tx }: QueryContext, tenant: string, agentNumber: number, limit: number, offset: number): Promise<AgentDefinitionRow[]> {
  // As listByTenant: the page's ids from the (tenant, agent_number, seq) index first.
  const page = tx(definitions).select("id").where({ tenant, agent_number: agentNumber }).orderBy("seq", "desc").limit(limit).offset(offset).as("p");
  return (await definitionsWithAgents(tx).join(page, "p.id", "d.id").orderBy("d.seq", "desc")) as AgentDefinitionRow[];
}
