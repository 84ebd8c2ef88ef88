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
import type { UpsertKey } from "./repository.js";
import type { AgentExternalIdRow, AgentRow, DefinitionReadRow, InstanceRow, NewAgentDefinitionRow, TenantRow } from "./rows.js";
import { fromDatabaseInteger } from "./rows.js";

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
/** What a write needs to know about an instance: never its document. */
const instanceColumns = ["d.id", "d.tenant", "d.agent_number", "a.reference_id", "d.created_at", "d.updated_at"];

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
export async function takeAgentNumber({ tx, dialect }: QueryContext, tenant: string): Promise<{ number: number; prefix: string | null }> {
  const query = tx(tenants).select(["sequence_prefix", "next_agent_number"]).where({ name: tenant });
  const row = (await lockedOnMysql(query, dialect).first()) as Pick<TenantRow, "sequence_prefix" | "next_agent_number"> | undefined;
  if (row === undefined) throw new Error(`Tenant "${tenant}" vanished inside its own write transaction.`);
  const number = fromDatabaseInteger(row.next_agent_number);
  const count = await tx(tenants)
    .where({ name: tenant, next_agent_number: number })
    .update({ next_agent_number: number + 1 });
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
export async function findAgentByNameForUpdate({ tx, dialect }: QueryContext, tenant: string, providerId: string, name: string): Promise<Pick<AgentRow, "number" | "reference_id"> | undefined> {
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

// ---- definitions, inside a write ----

/** Definitions joined with their agents, as `d` and `a`, selecting what a write decides on. */
function instancesWithAgents(tx: Knex | Knex.Transaction): Knex.QueryBuilder {
  return tx({ d: definitions })
    .join({ a: agents }, function joinAgent() {
      this.on("a.tenant", "=", "d.tenant").andOn("a.number", "=", "d.agent_number");
    })
    .select(instanceColumns);
}

/**
 * The instance holding `key`, locked on MySQL. Only the definition row is
 * locked, not its agent (a locking join would lock both, and a creator of a
 * version locks the agent first and then the key's index entry: a deadlock).
 * Agents never change once written, so reading the reference id unlocked is
 * exact. When no row holds the key nothing is locked under READ COMMITTED: a
 * racing insert of the same key fails on the unique index and its work runs
 * again.
 */
export async function findByKeyForUpdate({ tx, dialect }: QueryContext, tenant: string, key: UpsertKey): Promise<InstanceRow | undefined> {
  const query = tx(definitions).select(["id", "tenant", "agent_number", "created_at", "updated_at"]).where({ tenant, name: key.name, provider_id: key.providerId, version: key.version });
  const row = (await lockedOnMysql(query, dialect).first()) as Omit<InstanceRow, "reference_id"> | undefined;
  if (row === undefined) return undefined;
  const agent = (await tx(agents).select(["reference_id"]).where({ tenant, number: row.agent_number }).first()) as Pick<AgentRow, "reference_id"> | undefined;
  if (agent === undefined) throw new Error(`Agent ${String(row.agent_number)} of definition ${row.id} is missing.`);
  return { ...row, reference_id: agent.reference_id };
}

/** The instance with this id in this tenant. */
export async function findInstanceById({ tx }: QueryContext, tenant: string, id: string): Promise<InstanceRow | undefined> {
  return (await instancesWithAgents(tx).where({ "d.tenant": tenant, "d.id": id }).first()) as InstanceRow | undefined;
}

/** The newest instance (highest seq) of the agent with this reference id. */
export async function findNewestInstanceByReference({ tx }: QueryContext, tenant: string, referenceId: string): Promise<InstanceRow | undefined> {
  return (await instancesWithAgents(tx).where({ "a.tenant": tenant, "a.reference_id": referenceId }).orderBy("d.seq", "desc").first()) as InstanceRow | undefined;
}

/** Inserts a new row. No `returning()`: MySQL has none, and the caller knows every value. */
export async function insertDefinition({ tx, dialect }: QueryContext, row: NewAgentDefinitionRow): Promise<void> {
  // MySQL assigns seq by AUTO_INCREMENT; SQLite only auto-increments a primary key,
  // and its single writer makes MAX + 1 race-free (the unique index guards it anyway).
  const seq = dialect === "sqlite" ? { seq: tx.raw(`(SELECT COALESCE(MAX(seq), 0) + 1 FROM ${definitions})`) } : {};
  await tx(definitions).insert({ ...row, ...seq });
}

/** Replaces both encodings of an existing row, together; its id, key, agent and creation time stay. */
export async function updateDocument({ tx }: QueryContext, tenant: string, id: string, content: Pick<NewAgentDefinitionRow, "document" | "document_binary" | "updated_at">): Promise<void> {
  const count = await tx(definitions).where({ tenant, id }).update(content);
  if (count !== 1) throw new Error(`Expected to update one agent definition row, updated ${count}.`);
}

// ---- hot reads ----
//
// The reads every GET runs. Their SQL is written out here per dialect and built once, when the
// repository is created (readStatements), then run with bindings only (read-runner.ts): no query
// builder and no SQL compilation per request. Each starts from the tenant's row, so one statement both checks
// that the tenant exists and reads: no row at all means no such tenant; a row whose definition
// columns are null means the tenant exists but holds nothing that matches.

/** Runs one of readStatements' statements with its bindings and answers its rows. */
export type RunRead = (sql: string, bindings: readonly ReadBinding[]) => Promise<DefinitionReadRow[]>;

/** What the hot reads bind: tenant names, ids and numbers. */
export type ReadBinding = string | number;

/** Where a hot read runs: the runner, and the statements built for its dialect. */
export interface ReadContext {
  readonly run: RunRead;
  readonly statements: ReadStatements;
}

/** The SQL of the hot reads, for one dialect. */
export interface ReadStatements {
  /** Bindings: id, tenant. */
  readonly byId: string;
  /** Bindings: reference id, tenant. */
  readonly newestByReference: string;
  /** Bindings: tenant, tenant, limit, offset, tenant. */
  readonly pageOfTenant: string;
  /** Bindings: tenant, agent number, tenant, agent number, limit, offset, tenant. */
  readonly pageOfAgent: string;
}

/** Builds the hot reads' SQL for `dialect`; the repository does it once. */
export function readStatements(dialect: Dialect): ReadStatements {
  // Both encodings come back as Buffers, answered as they are: MySQL's document is a LONGBLOB,
  // SQLite's TEXT is read as a BLOB (migration 0006 says why, with measurements).
  const json = dialect === "mysql" ? "d.document" : "CAST(d.document AS BLOB)";
  const columns = `d.id, d.agent_number, a.reference_id, ${json} AS document_json, d.document_binary, d.created_at, d.updated_at`;
  const agentOfDefinition = `LEFT JOIN ${agents} a ON a.tenant = d.tenant AND a.number = d.agent_number`;
  // A page: its ids from the (tenant, seq) or (tenant, agent_number, seq) index alone, then only
  // those rows read and joined (OFFSET over the joined rows made MariaDB read and sort whole
  // documents: 16 s for the last page of 100,000 definitions, BENCHMARKS.md). The total is an
  // uncorrelated scalar subquery, which both databases run once per statement, not per row (as
  // a derived table, MariaDB re-checked the tenant on each of the 100,000 index entries it
  // counted: 3 ms more). No ORDER BY outside: the page's rows are the right ones (the LIMIT is
  // inside), and sorting them after the outer join took MariaDB a temporary table with the
  // documents in it, 0.25 ms of its 0.4 ms per page of 20 (ANALYZE); inPageOrder puts the 20
  // in order instead. An empty page (limit 0, or past the end) is the tenant's row with the total
  // and nulls.
  const page = (where: string, direction: "ASC" | "DESC") => `
    SELECT (SELECT COUNT(*) FROM ${definitions} WHERE ${where}) AS total, d.seq, ${columns}
    FROM ${tenants} t
    LEFT JOIN (SELECT id FROM ${definitions} WHERE ${where} ORDER BY seq ${direction} LIMIT ? OFFSET ?) p ON 1 = 1
    LEFT JOIN ${definitions} d ON d.id = p.id
    ${agentOfDefinition}
    WHERE t.name = ?`;
  return {
    byId: `
      SELECT ${columns}
      FROM ${tenants} t
      LEFT JOIN ${definitions} d ON d.tenant = t.name AND d.id = ?
      ${agentOfDefinition}
      WHERE t.name = ?`,
    // The newest version's id from the (tenant, agent_number, seq) index, then that one row by
    // its primary key. Joined to every version and sorted (ORDER BY d.seq DESC LIMIT 1), MariaDB
    // chose to read the whole tenant through its (tenant, seq) index into a temporary table
    // with the documents in it: 1.6 ms at 1,000 definitions, against 0.05 ms (ANALYZE).
    newestByReference: `
      SELECT ${columns}
      FROM ${tenants} t
      LEFT JOIN ${agents} a ON a.tenant = t.name AND a.reference_id = ?
      LEFT JOIN ${definitions} d ON d.id = (
        SELECT n.id FROM ${definitions} n WHERE n.tenant = a.tenant AND n.agent_number = a.number ORDER BY n.seq DESC LIMIT 1
      )
      WHERE t.name = ?`,
    pageOfTenant: page("tenant = ?", "ASC"),
    pageOfAgent: page("tenant = ? AND agent_number = ?", "DESC"),
  };
}

/** The tenant's row, with the instance with this id if the tenant holds one. */
export function readById({ run, statements }: ReadContext, tenant: string, id: string): Promise<DefinitionReadRow[]> {
  return run(statements.byId, [id, tenant]);
}

/** The tenant's row, with the newest instance of the agent with this reference id if there is one. */
export function readNewestByReference({ run, statements }: ReadContext, tenant: string, referenceId: string): Promise<DefinitionReadRow[]> {
  return run(statements.newestByReference, [referenceId, tenant]);
}

/** A page of the tenant's instances in insertion order, each row with the total; one row of nulls and the total when the page is empty. */
export async function readPageOfTenant({ run, statements }: ReadContext, tenant: string, limit: number, offset: number): Promise<DefinitionReadRow[]> {
  return inPageOrder(await run(statements.pageOfTenant, [tenant, tenant, limit, offset, tenant]), 1);
}

/** A page of one agent's instances, newest first, as readPageOfTenant. */
export async function readPageOfAgent({ run, statements }: ReadContext, tenant: string, agentNumber: number, limit: number, offset: number): Promise<DefinitionReadRow[]> {
  return inPageOrder(await run(statements.pageOfAgent, [tenant, agentNumber, tenant, agentNumber, limit, offset, tenant]), -1);
}

/** Sorts a page's rows by seq (ascending for 1, descending for -1), which its statement leaves to us. */
export function inPageOrder(rows: DefinitionReadRow[], direction: 1 | -1): DefinitionReadRow[] {
  return rows.sort((a, b) => direction * (Number(a.seq ?? 0) - Number(b.seq ?? 0)));
}
