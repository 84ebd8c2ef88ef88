/**
 * What SQL says about liveness (issue 44; migration 0021's definition_liveness): the published columns a write
 * transaction sets (with a LIVENESS_CHANGED change record), and the prober's schedule: the rows it seeds for
 * ACTIVE versions, the batches it leases, the failures in a row and next due time it sets after each probe.
 */
import type { ListQuery } from "../../domain/list-query.js";
import type { Dialect } from "../run/connection.js";
import type { Sql } from "./sql-text.js";
import { definitionLiveness, definitions } from "./tables.js";

/** A liveness row as the statements answer it. */
export interface LivenessRow {
  readonly tenant: string;
  readonly definition_id: string;
  readonly state: string;
  readonly drift: string | null;
  readonly liveness: string | null;
  readonly failures: number | string;
}

/** The published columns of a version and its failures in a row. */
const livenessColumns = "tenant, definition_id, state, drift, liveness, failures";

export interface LivenessStatements {
  /** Bindings: tenant, id. The version's row; locks it on MySQL (inside a write). */
  readonly rowForUpdate: string;
  /** Bindings: tenant, id. */
  readonly row: string;
  /**
   * Bindings: tenant, id, state, drift, liveness, probe due at. Sets the published columns; inserts the row (due
   * then) when there is none.
   */
  readonly publish: string;
  /**
   * Bindings: from, spread (ms), limit. A row for each ACTIVE version that has none, each due at a random time of
   * [from, from + spread): versions added together (a first start on a full database) are spread over an interval
   * instead of all due again together at every interval.
   */
  readonly seed: string;
  /** Bindings: now, now, limit. The rows due and not leased, oldest due first; MySQL: locked, skipping locked. */
  readonly due: string;
  /** Bindings: lease until, owner, now, now, limit (SQLite: leases the due rows in one statement). */
  readonly leaseDue: string;
  /** Bindings: lease until, owner, tenant, id. */
  readonly lease: string;
  /** Bindings: owner, lease until. The rows one claim leased. */
  readonly leased: string;
  /**
   * Bindings: tenant, id, failures, due at. After a probe: its failures in a row, the next due time, the lease
   * given back; inserts the row when there is none (a version probed on demand before the schedule saw it).
   */
  readonly finish: string;
  /** How many rows are in each state. */
  readonly states: string;
}

/** The statements for `dialect`. */
export function livenessStatements(dialect: Dialect): LivenessStatements {
  const mysql = dialect === "mysql";
  const upsert = (set: string) =>
    mysql
      ? `ON DUPLICATE KEY UPDATE ${set.replace(/excluded\.(\w+)/g, "VALUES($1)")}`
      : `ON CONFLICT (tenant, definition_id) DO UPDATE SET ${set}`;
  return {
    rowForUpdate: `SELECT ${livenessColumns} FROM ${definitionLiveness} WHERE tenant = ? AND definition_id = ?${
      mysql ? " FOR UPDATE" : ""
    }`,
    row: `SELECT ${livenessColumns} FROM ${definitionLiveness} WHERE tenant = ? AND definition_id = ?`,
    publish:
      `INSERT INTO ${definitionLiveness} (tenant, definition_id, state, drift, liveness, probe_due_at) ` +
      `VALUES (?, ?, ?, ?, ?, ?) ` +
      upsert("state = excluded.state, drift = excluded.drift, liveness = excluded.liveness"),
    // The anti-join reads the definitions' (tenant, status, ...) index and each version's liveness by its key.
    seed:
      `INSERT INTO ${definitionLiveness} (tenant, definition_id, probe_due_at) ` +
      `SELECT d.tenant, d.id, ${
        mysql
          ? "DATE_ADD(?, INTERVAL FLOOR(RAND() * ?) * 1000 MICROSECOND)"
          : "strftime('%Y-%m-%d %H:%M:%f', julianday(?) + (abs(random()) % ?) / 86400000.0)"
      } FROM ${definitions} d WHERE d.status = 'ACTIVE' AND d.agent_number IS NOT NULL ` +
      `AND NOT EXISTS (SELECT 1 FROM ${definitionLiveness} l WHERE l.tenant = d.tenant AND l.definition_id = d.id) ` +
      `LIMIT ? ${mysql ? "ON DUPLICATE KEY UPDATE probe_due_at = probe_due_at" : "ON CONFLICT DO NOTHING"}`,
    due:
      `SELECT tenant, definition_id FROM ${definitionLiveness} ` +
      "WHERE probe_due_at <= ? AND (lease_until IS NULL OR lease_until < ?) ORDER BY probe_due_at LIMIT ?" +
      (mysql ? " FOR UPDATE SKIP LOCKED" : ""),
    leaseDue:
      `UPDATE ${definitionLiveness} SET lease_until = ?, lease_owner = ? WHERE rowid IN (` +
      `SELECT rowid FROM ${definitionLiveness} WHERE probe_due_at <= ? AND (lease_until IS NULL OR lease_until < ?) ` +
      "ORDER BY probe_due_at LIMIT ?)",
    lease: `UPDATE ${definitionLiveness} SET lease_until = ?, lease_owner = ? WHERE tenant = ? AND definition_id = ?`,
    states: `SELECT state, COUNT(*) AS n FROM ${definitionLiveness} GROUP BY state`,
    leased: `SELECT ${livenessColumns} FROM ${definitionLiveness} WHERE lease_owner = ? AND lease_until = ?`,
    finish:
      `INSERT INTO ${definitionLiveness} (tenant, definition_id, failures, probe_due_at) VALUES (?, ?, ?, ?) ` +
      upsert(
        "failures = excluded.failures, probe_due_at = excluded.probe_due_at, lease_until = NULL, lease_owner = NULL",
      ),
  };
}

/**
 * The list's liveness filters (issue 44), added to a search's WHERE: each match's liveness row, found by its
 * definition's seq (`seq`, the statement's column) and key; a version with none is NOT_PROBED, and has no drift.
 */
export function livenessMatch(sql: Sql, query: Pick<ListQuery, "liveness" | "drift">, seq: string): void {
  const of = (column: string) =>
    `(SELECT l.${column} FROM ${definitions} ld JOIN ${definitionLiveness} l ON l.tenant = ld.tenant ` +
    `AND l.definition_id = ld.id WHERE ld.seq = ${seq})`;
  if (query.liveness !== undefined) sql.add(`AND COALESCE(${of("state")}, 'NOT_PROBED')`).in(query.liveness);
  if (query.drift !== undefined) sql.add(`AND ${of("drift")}`).in(query.drift);
}
