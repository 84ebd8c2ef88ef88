/**
 * The SQL of the write transaction (sql-writer.ts), per dialect: written out here and built once
 * (writeStatements), each statement run through the driver on the transaction's one connection
 * (run/writes.ts), with bindings only. The functions that run them: writes.ts, agents.ts, revisions.ts.
 */

import type { Dialect } from "../run/connection.js";
import type { WriteSession } from "../run/writes.js";
import { livenessColumn, readColumns } from "./reads.js";
import { agents, definitionChanges, definitions, externalIds, tenantRevisions, tenants } from "./tables.js";

/** A row as a write inserts it: its integer columns as numbers, its creation time as toDatabaseTimestamp's text. */
export type NewRow<Row, Integers extends keyof Row> = Omit<Row, Integers | "created_at"> & {
  readonly [K in Integers]: number;
} & { readonly created_at: string };

/** Where a statement of a write transaction runs: its session, and the statements built for its dialect. */
export interface WriteContext {
  readonly session: WriteSession;
  readonly statements: WriteStatements;
}

/** The SQL of the write transaction, for one dialect. */
export interface WriteStatements {
  readonly dialect: Dialect;
  /** Bindings: name. */
  readonly tenant: string;
  /** Bindings: tenant, name, provider id, version. Locks the definition on MySQL, not its agent. */
  readonly instanceByKey: string;
  /** Bindings: tenant, id. */
  readonly instanceById: string;
  /** Bindings: tenant, id. Locks the definition on MySQL, not its agent. */
  readonly instanceByIdForUpdate: string;
  /** Bindings: tenant, agent number. Every version of the agent, newest first; locks them on MySQL. */
  readonly instancesOfAgentForUpdate: string;
  /**
   * MySQL only. Bindings: tenant, number. Locks the agent's row by writing it (raises lock_count): what
   * serializes changes to its versions' status and latest flag, on every node of a Galera cluster.
   */
  readonly lockAgent: string;
  /** Bindings: tenant, agent number. Clears the latest flag of the agent's versions (before a new version takes it). */
  readonly clearLatest: string;
  /** Bindings: tenant, agent number. The id of the agent's newest version that is not DEACTIVATED. */
  readonly newestLiveOfAgent: string;
  /**
   * Bindings: id, tenant, agent number, id. Sets the latest flag on that version (none for ""), clears it on
   * the others.
   */
  readonly setLatest: string;
  /** Bindings: status, status message, status changed at, updated at, tenant, id. Raises the revision. */
  readonly updateStatus: string;
  /** Bindings: tenant, id. The stored definition, read inside the write (as the hot reads read it). */
  readonly storedById: string;
  /** Bindings: tenant, reference id. */
  readonly newestInstanceByReference: string;
  /** Bindings: tenant, provider id, name. Locks on MySQL. */
  readonly agentByName: string;
  /** MySQL only. Bindings: provider id, name, tenant. */
  readonly lockSequenceAndFindAgent: string;
  /** Bindings: tenant. MySQL: sets LAST_INSERT_ID to the raised number; SQLite: answers it. */
  readonly takeAgentNumber: string;
  /** Bindings: tenant, number, reference id, provider id, name, created at. */
  readonly insertAgent: string;
  /** Bindings: tenant, provider id, externalAgentID. Locks on MySQL. */
  readonly externalIdOwner: string;
  /** Bindings: tenant, provider id, externalAgentID, agent number, created at. */
  readonly insertExternalId: string;
  /**
   * Bindings: id, tenant, name, provider id, version, agent number, document, binary, created at, updated at,
   * status changed at, latest. Answers the new row's seq (MySQL: its insertId; SQLite: RETURNING).
   */
  readonly insertDefinition: string;
  /** Bindings: document, binary, updated at, tenant, id. Raises the revision. */
  readonly updateDocument: string;
  /**
   * MySQL only. Bindings: agent number, document, binary, seq. Gives a row staged without its agent
   * (prepareInsert) its agent and its document.
   */
  readonly numberDefinition: string;
  /** Bindings: tenant, agent number. The ids of the agent's versions that carry the latest flag. */
  readonly latestOfAgent: string;
  /**
   * MySQL: bindings tenant, changes (JSON: [[id, kind, agent number, changed at], ...]), and the id, document,
   * binary and updated at of one version whose new content it writes (or four NULLs). Calls migration 0015's
   * procedure, which takes one revision of the tenant's counter per change, locking its row, sets each
   * version's mod_revision, appends the change records, COMMITs, and answers the last revision as a row: the
   * counter stays locked for no round trip. SQLite: bindings tenant, count. Takes `count` revisions and answers
   * the last as a row; the two statements below then write the rest, and COMMIT follows.
   */
  readonly takeRevisions: string;
  /** SQLite. Bindings: revision, tenant, id. Sets the version's mod_revision. */
  readonly setModRevision: string;
  /** SQLite. Bindings: tenant, revision, kind, definition id, agent number, changed at; per row. */
  readonly insertChanges: (rows: number) => string;
}

/** Builds the write transaction's SQL for `dialect`; the repository does it once. */
export function writeStatements(dialect: Dialect): WriteStatements {
  const parts = statementParts(dialect);
  return { dialect, ...lookups(dialect, parts), ...changes(parts) };
}

/** What the statements share: the locking clause, the seq column, and the instances' SELECTs. */
function statementParts(dialect: Dialect) {
  const mysql = dialect === "mysql";
  // SQLite needs no locks (see the top of writes.ts).
  const locked = mysql ? " FOR UPDATE" : "";
  // MySQL assigns seq by AUTO_INCREMENT; SQLite only auto-increments a primary key,
  // and its single writer makes MAX + 1 race-free (the unique index guards it anyway).
  const seq = mysql
    ? { column: "", value: "" }
    : { column: "seq, ", value: `(SELECT COALESCE(MAX(seq), 0) + 1 FROM ${definitions}), ` };
  const instanceColumns =
    "d.id, d.tenant, d.agent_number, d.name, d.provider_id, d.version, d.created_at, d.updated_at, d.revision, " +
    "d.mod_revision, d.status, d.status_message, d.status_changed_at, d.is_latest, d.document_binary, " +
    livenessColumn;
  const instances =
    `SELECT ${instanceColumns}, a.reference_id FROM ${definitions} d JOIN ${agents} a ON a.tenant ` +
    `= d.tenant AND a.number = d.agent_number`;
  // The agent's reference id by a subquery in locking reads, which then lock the definition rows only (see
  // instanceByKey).
  const lockedInstances =
    `SELECT ${instanceColumns}, (SELECT a.reference_id FROM ${agents} a WHERE a.tenant = ` +
    `d.tenant AND a.number = d.agent_number) AS reference_id FROM ${definitions} d`;
  return { mysql, locked, seq, instances, lockedInstances };
}

type Parts = ReturnType<typeof statementParts>;

/** The reads and locks of the write transaction: the rows it decides on. */
function lookups(
  dialect: Dialect,
  { locked, instances, lockedInstances }: Parts,
): Omit<WriteStatements, "dialect" | keyof ReturnType<typeof changes>> {
  return {
    tenant: `SELECT name, sequence_prefix, next_agent_number, created_at FROM ${tenants} WHERE name = ? LIMIT 1`,
    // The agent's reference id by a subquery, which a locking read does not lock (MySQL: "a locking
    // read clause in an outer statement does not lock the rows of a table in a nested subquery";
    // checked on MariaDB 10.11 with FOR UPDATE NOWAIT from a second session): see findByKeyForUpdate.
    instanceByKey:
      `${lockedInstances} WHERE d.tenant = ? AND d.name = ? AND d.provider_id = ? AND d.version = ? ` +
      `LIMIT 1${locked}`,
    instanceById: `${instances} WHERE d.tenant = ? AND d.id = ? LIMIT 1`,
    instanceByIdForUpdate: `${lockedInstances} WHERE d.tenant = ? AND d.id = ? LIMIT 1${locked}`,
    instancesOfAgentForUpdate:
      `${lockedInstances} WHERE d.tenant = ? AND d.agent_number = ? ORDER BY d.seq ` + `DESC${locked}`,
    // A write, not a locking read: Galera certifies written rows only, and a FOR UPDATE holds on its own node.
    lockAgent: `UPDATE ${agents} SET lock_count = lock_count + 1 WHERE tenant = ? AND number = ?`,
    clearLatest: `UPDATE ${definitions} SET is_latest = 0 WHERE tenant = ? AND agent_number = ? AND is_latest = 1`,
    newestLiveOfAgent:
      `SELECT id FROM ${definitions} WHERE tenant = ? AND agent_number = ? AND status <> ` +
      `'DEACTIVATED' ORDER BY seq DESC LIMIT 1`,
    setLatest:
      `UPDATE ${definitions} SET is_latest = CASE WHEN id = ? THEN 1 ELSE 0 END WHERE tenant = ? AND ` +
      `agent_number = ? AND is_latest <> CASE WHEN id = ? THEN 1 ELSE 0 END`,
    updateStatus:
      `UPDATE ${definitions} SET status = ?, status_message = ?, status_changed_at = ?, updated_at = ` +
      `?, revision = revision + 1 WHERE tenant = ? AND id = ?`,
    storedById:
      `SELECT ${readColumns(dialect)} FROM ${definitions} d LEFT JOIN ${agents} a ON a.tenant = d.tenant ` +
      `AND a.number = d.agent_number WHERE d.tenant = ? AND d.id = ?`,
    newestInstanceByReference: `${instances} WHERE a.tenant = ? AND a.reference_id = ? ORDER BY d.seq DESC LIMIT 1`,
    agentByName:
      `SELECT number, reference_id FROM ${agents} WHERE tenant = ? AND provider_id = ? AND name = ? ` +
      `LIMIT 1${locked}`,
    // The tenant's row, locked, and the agent if it exists by now (locked too): one round trip
    // where a lock and a second look took two, both while holding the sequence.
    lockSequenceAndFindAgent:
      `SELECT a.number, a.reference_id FROM ${tenants} t LEFT JOIN ${agents} a ON a.tenant ` +
      `= t.name AND a.provider_id = ? AND a.name = ? WHERE t.name = ?${locked}`,
  };
}

/** The inserts and updates of the write transaction, and its revisions. */
function changes({ mysql, locked, seq }: Parts) {
  return {
    // One statement locks the row, raises the number and answers it: MySQL hands the value given to
    // LAST_INSERT_ID(expr) back as the statement's insert id, SQLite answers it with RETURNING.
    takeAgentNumber: mysql
      ? `UPDATE ${tenants} SET next_agent_number = LAST_INSERT_ID(next_agent_number + 1) WHERE name = ?`
      : `UPDATE ${tenants} SET next_agent_number = next_agent_number + 1 WHERE name = ? RETURNING next_agent_number`,
    insertAgent:
      `INSERT INTO ${agents} (tenant, number, reference_id, provider_id, name, created_at) VALUES (?, ` +
      `?, ?, ?, ?, ?)`,
    externalIdOwner:
      `SELECT agent_number FROM ${externalIds} WHERE tenant = ? AND provider_id = ? AND ` +
      `external_agent_id = ? LIMIT 1${locked}`,
    insertExternalId:
      `INSERT INTO ${externalIds} (tenant, provider_id, external_agent_id, agent_number, ` +
      `created_at) VALUES (?, ?, ?, ?, ?)`,
    insertDefinition:
      `INSERT INTO ${definitions} (${seq.column}id, tenant, name, provider_id, version, agent_number, document, ` +
      "document_binary, created_at, updated_at, revision, status, status_message, status_changed_at, is_latest) " +
      `VALUES (${seq.value}?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 'ACTIVE', NULL, ?, ?)${mysql ? "" : " RETURNING seq"}`,
    updateDocument:
      `UPDATE ${definitions} SET document = ?, document_binary = ?, updated_at = ?, revision = ` +
      `revision + 1 WHERE tenant = ? AND id = ?`,
    numberDefinition:
      `UPDATE ${definitions} SET agent_number = ?, document = ?, document_binary = ? WHERE seq = ? AND ` +
      "agent_number IS NULL",
    latestOfAgent: `SELECT id FROM ${definitions} WHERE tenant = ? AND agent_number = ? AND is_latest = 1`,
    // An upsert, so a tenant made by a version before migration 0015 (which has no row) starts its count here.
    takeRevisions: mysql
      ? "CALL asor_commit_revisions(?, ?, ?, ?, ?, ?, ?)"
      : `INSERT INTO ${tenantRevisions} (tenant, revision) VALUES (?, ?) ON CONFLICT (tenant) DO UPDATE SET ` +
        "revision = revision + excluded.revision RETURNING revision",
    setModRevision: `UPDATE ${definitions} SET mod_revision = ? WHERE tenant = ? AND id = ?`,
    insertChanges: (rows: number) =>
      `INSERT INTO ${definitionChanges} (tenant, revision, kind, definition_id, agent_number, changed_at) VALUES ` +
      Array.from({ length: rows }, () => "(?, ?, ?, ?, ?, ?)").join(", "),
  };
}
