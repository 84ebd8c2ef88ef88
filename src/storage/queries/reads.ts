/**
 * The hot reads (GET by id, by `Agent_ID=` reference): their SQL per dialect,
 * built once, and the functions that run it through a ReadContext
 * (run/reads.ts). No pools or timers here: what runs a read is run/'s.
 */
import type { DefinitionReadRow } from "../rows.js";
import type { Dialect } from "../run/connection.js";
import { agents, definitions, tenants } from "./tables.js";

// ---- hot reads ----
//
// The reads every GET runs. Their SQL is written out here per dialect and built once, when the
// repository is created (readStatements), then run with bindings only (run/reads.ts): no query
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

/**
 * One hot read by a key (an id, a reference id) in a tenant: the tenant's row, with the definition the key
 * names if the tenant holds one. No row at all means no such tenant.
 */
export interface KeyedRead {
  /** Bindings: the key, then the tenant. */
  readonly one: string;
  /**
   * The same for `count` keys of one tenant at once (`IN (...)`): bindings the keys, then the tenant. It
   * answers no row for an unknown tenant, else a row for each key that names a definition, or the tenant's
   * row alone when none does (rowsOfKey takes one key's rows out of it).
   */
  many(count: number): string;
  /**
   * The column of a row that holds its key, as stored: both key columns have NO PAD binary collations
   * (`ascii_bin`, exactCollation's), so a key names a row exactly when their strings are equal.
   */
  readonly keyColumn: "id" | "reference_id";
}

/** The SQL of the hot reads, for one dialect. */
export interface ReadStatements {
  readonly byId: KeyedRead;
  /** The newest version of the agent a reference id (`Agent_ID=...`) names. */
  readonly newestByReference: KeyedRead;
}

/**
 * The columns of a stored definition as the reads answer it (`d` the definition, `a` its agent):
 * both encodings, and the lifecycle columns (migration 0008) that answers splice in as `meta`,
 * in the same statement. Both encodings come back as Buffers, answered as they are: MySQL's
 * document is a LONGBLOB, SQLite's TEXT is read as a BLOB (migration 0006 says why, with measurements).
 */
export function readColumns(dialect: Dialect): string {
  const json = dialect === "mysql" ? "d.document" : "CAST(d.document AS BLOB)";
  return (
    `d.id, d.agent_number, a.reference_id, ${json} AS document_json, d.document_binary, d.created_at, ` +
    `d.updated_at, d.revision, d.mod_revision, d.status, d.status_message, d.status_changed_at, d.is_latest, ` +
    livenessColumn
  );
}

/**
 * A version's `meta.liveness` (migration 0021) as the reads answer it: a primary-key lookup of its own row, by a
 * subquery, so every statement that reads a definition reads it without a join of its own (and a locking read
 * locks the definition's row only, as with its agent's reference id).
 */
export const livenessColumn =
  "(SELECT l.liveness FROM definition_liveness l WHERE l.tenant = d.tenant AND l.definition_id = d.id) AS liveness";

/**
 * The tenant's revision as the statement's snapshot holds it (migration 0015), from the tenant's row `t` the
 * reads start from: one primary-key lookup. Every change a read answers has a revision at most this, and every
 * change it does not answer one above it, so watching from it misses nothing.
 */
export const tenantRevisionColumn =
  "(SELECT r.revision FROM tenant_revisions r WHERE r.tenant = t.name) AS tenant_revision";

/**
 * The same as a join, for the hot reads by id: on MariaDB 10.11 the correlated subquery cost 11 % of the
 * statement's throughput at 10 connections (10,800 against 12,100 queries/s), the join 1 % (issue 20's notes).
 */
const tenantRevisionJoin = "LEFT JOIN tenant_revisions r ON r.tenant = t.name";
const tenantRevisionJoined = "r.revision AS tenant_revision";

/** Builds the hot reads' SQL for `dialect`; the repository does it once. */
export function readStatements(dialect: Dialect): ReadStatements {
  const columns = readColumns(dialect);
  const agentOfDefinition = `LEFT JOIN ${agents} a ON a.tenant = d.tenant AND a.number = d.agent_number`;
  const newestOfAgent =
    `SELECT n.id FROM ${definitions} n WHERE n.tenant = a.tenant AND n.agent_number = a.number ` +
    "ORDER BY n.is_latest DESC, n.seq DESC LIMIT 1";
  // The IN form names its index on MySQL: with a tenant's statistics not yet gathered (a new or small
  // table), MariaDB 10.11 chose the (tenant, ...) primary key of agents for several reference ids, reading
  // every agent of the tenant, where one reference id reads its unique key (EXPLAIN, 2026-11-27).
  const index = (name: string, many: boolean): string => (many && dialect === "mysql" ? ` FORCE INDEX (${name})` : "");
  const byId = (match: string, many: boolean): string => `
      SELECT ${columns}, ${tenantRevisionJoined}
      FROM ${tenants} t
      ${tenantRevisionJoin}
      LEFT JOIN ${definitions} d${index("PRIMARY", many)} ON d.tenant = t.name AND d.id ${match}
      ${agentOfDefinition}
      WHERE t.name = ?`;
  // The version an `Agent_ID=` names: the newest that is not DEACTIVATED (the one is_latest marks),
  // else the newest of all: its id from the (tenant, agent_number, is_latest, seq) index (migration
  // 0008), then that one row by its primary key. Joined to every version and sorted, MariaDB
  // chose to read the whole tenant through its (tenant, seq) index into a temporary table
  // with the documents in it: 1.6 ms at 1,000 definitions, against 0.05 ms (ANALYZE).
  const newestByReference = (match: string, many: boolean): string => `
      SELECT ${columns}, ${tenantRevisionJoined}
      FROM ${tenants} t
      ${tenantRevisionJoin}
      LEFT JOIN ${agents} a${index("uq_agents_reference_id", many)} ON a.tenant = t.name AND a.reference_id ${match}
      LEFT JOIN ${definitions} d ON d.id = (
        ${newestOfAgent}
      )
      WHERE t.name = ?`;
  return {
    byId: keyedRead(byId, "id"),
    newestByReference: keyedRead(newestByReference, "reference_id"),
  };
}

/**
 * A KeyedRead from its statement with the key's match (`= ?`, `IN (?, ?)`) left open, and whether it is the IN
 * form; `many`'s statements kept by count.
 */
function keyedRead(statement: (match: string, many: boolean) => string, keyColumn: KeyedRead["keyColumn"]): KeyedRead {
  const many: string[] = [];
  const keys = (count: number): string => `IN (${Array.from({ length: count }, () => "?").join(", ")})`;
  return {
    one: statement("= ?", false),
    many: (count) => (many[count] ??= statement(keys(count), true)),
    keyColumn,
  };
}

/** The tenant's row, with the instance with this id if the tenant holds one. */
export function readById({ run, statements }: ReadContext, tenant: string, id: string): Promise<DefinitionReadRow[]> {
  return run(statements.byId.one, [id, tenant]);
}

/**
 * What `read.one` would have answered for `key`, out of what `read.many` answered for several keys of the
 * same tenant: the key's row when it names a definition there, else the tenant's row with no definition in
 * it, and no row when the tenant is unknown.
 */
export function rowsOfKey(read: KeyedRead, rows: readonly DefinitionReadRow[], key: string): DefinitionReadRow[] {
  const [first] = rows;
  if (first === undefined) return [];
  const found = rows.find((row) => row[read.keyColumn] === key);
  return [found ?? tenantRowOnly(first)];
}

/** A read's row with no definition in it: what a read whose key names nothing answers for a known tenant. */
function tenantRowOnly(row: DefinitionReadRow): DefinitionReadRow {
  return {
    tenant_revision: row.tenant_revision ?? null,
    id: null,
    agent_number: null,
    reference_id: null,
    document_json: null,
    document_binary: null,
    created_at: null,
    updated_at: null,
    revision: null,
    mod_revision: null,
    status: null,
    status_message: null,
    status_changed_at: null,
    is_latest: null,
  };
}

/** The tenant's row, with the newest instance of the agent with this reference id if there is one. */
export function readNewestByReference(
  { run, statements }: ReadContext,
  tenant: string,
  referenceId: string,
): Promise<DefinitionReadRow[]> {
  return run(statements.newestByReference.one, [referenceId, tenant]);
}
