/**
 * The change log as watchers read it (issue 20, items 2-4): the tenants' revision counters, the change
 * records after a revision with each definition as it is now, and the compaction that bounds the log.
 * The tables are migration 0015's (tenant_revisions, definition_changes); the writes that fill them are
 * the write transaction's (write-transaction.ts), which this module never touches.
 */
import type { Knex } from "knex";
import { type RunRead, readColumns } from "./queries/reads.js";
import { documentBytes } from "./queries/search.js";
import { agents, definitionChanges, definitions, tenantRevisions } from "./queries/tables.js";
import type { ChangeKind as WrittenKind } from "./queries/writes.js";
import type { ChangeHead, ChangeKind, ChangeLog, ChangeRecord, Retention } from "./repository.js";
import {
  type DatabaseInteger,
  type DefinitionReadRow,
  fromDatabaseInteger,
  toDatabaseTimestamp,
  toStoredDefinition,
} from "./rows.js";
import type { Dialect } from "./run/connection.js";

export type { ChangeHead, ChangeKind, ChangeLog, ChangeRecord, Retention } from "./repository.js";

/** The kinds the write transaction records are the kinds the log answers (a compile-time check). */
const sameKinds: [WrittenKind, ChangeKind] extends [ChangeKind, WrittenKind] ? true : never = true;
void sameKinds;

interface ChangeRow extends DefinitionReadRow {
  readonly change_revision: DatabaseInteger;
  readonly change_kind: ChangeKind;
}

/**
 * The most change records one DELETE of the compaction removes: each is a transaction of its own, so the
 * first compaction after migration 0015's backfill (a record per definition: a million at a million) is
 * not one transaction of 900,000 row deletions, which a Galera cluster would certify and apply as one
 * writeset while holding back every other commit.
 */
const deleteBatch = 10_000;

/** Every tenant that has taken a revision, with it. */
const tenantsSql = `SELECT tenant, revision, NULL AS young FROM ${tenantRevisions} WHERE revision > 0`;

/**
 * The same, with each tenant's oldest record written at or after `?` (compaction by age): one statement,
 * each tenant's subquery read along the primary key (tenant, revision) and stopping at that record.
 */
const tenantsByAgeSql = `
    SELECT r.tenant, r.revision, (
      SELECT c.revision FROM ${definitionChanges} c WHERE c.tenant = r.tenant AND c.changed_at >= ?
      ORDER BY c.revision LIMIT 1
    ) AS young
    FROM ${tenantRevisions} r WHERE r.revision > 0`;

const oldestSql = `SELECT MIN(revision) AS oldest FROM ${definitionChanges} WHERE tenant = ?`;

/** The change records after a revision, each with its definition as it is now. */
function changeRowsSql(dialect: Dialect): string {
  return `
    SELECT c.revision AS change_revision, c.kind AS change_kind, ${readColumns(dialect)}
    FROM ${definitionChanges} c
    JOIN ${definitions} d ON d.tenant = c.tenant AND d.id = c.definition_id
    LEFT JOIN ${agents} a ON a.tenant = d.tenant AND a.number = d.agent_number
    WHERE c.tenant = ? AND c.revision > ? AND c.revision <= ?
    ORDER BY c.revision
    LIMIT ?`;
}

/**
 * The same records' revisions with their definition's bytes, read without its documents: twice its JSON's (the
 * binary encoding is no larger), from MySQL's stored column or SQLite's octet_length, which reads the record's
 * header only (documentBytes).
 */
function headRowsSql(dialect: Dialect): string {
  return `
    SELECT c.revision AS change_revision, 2 * ${documentBytes(dialect, "d")} AS bytes
    FROM ${definitionChanges} c
    JOIN ${definitions} d ON d.tenant = c.tenant AND d.id = c.definition_id
    WHERE c.tenant = ? AND c.revision > ? AND c.revision <= ?
    ORDER BY c.revision
    LIMIT ?`;
}

/**
 * The change log on `db` (the read pool): selects through the driver (`run`), deletes through knex, at most
 * `batch` records per statement. `poll`, when given, runs the reads the change reader makes at every poll (the
 * counters, the new records) on a connection of their own, so that they never queue behind the pool's other
 * users; compaction stays on `run` and `db`.
 */
export function createChangeLog(
  db: Knex,
  dialect: Dialect,
  run: RunRead,
  { batch = deleteBatch, poll = run }: { batch?: number; poll?: RunRead } = {},
): ChangeLog {
  return new SqlChangeLog(db, dialect, run, poll, batch);
}

class SqlChangeLog implements ChangeLog {
  readonly #db: Knex;
  readonly #run: RunRead;
  readonly #poll: RunRead;
  readonly #batch: number;
  readonly #changeRows: string;
  readonly #headRows: string;

  constructor(db: Knex, dialect: Dialect, run: RunRead, poll: RunRead, batch: number) {
    this.#db = db;
    this.#run = run;
    this.#poll = poll;
    this.#batch = batch;
    this.#changeRows = changeRowsSql(dialect);
    this.#headRows = headRowsSql(dialect);
  }

  async revisions(tenants: readonly string[]): Promise<Map<string, number>> {
    const found = new Map<string, number>(tenants.map((t) => [t, 0]));
    if (tenants.length === 0) return found;
    const marks = tenants.map(() => "?").join(", ");
    const sql = `SELECT tenant, revision FROM ${tenantRevisions} WHERE tenant IN (${marks})`;
    for (const row of await rows<{ tenant: string; revision: DatabaseInteger }>(this.#poll, sql, tenants))
      found.set(row.tenant, fromDatabaseInteger(row.revision));
    return found;
  }

  async read(tenant: string, after: number, upTo: number, limit: number): Promise<ChangeRecord[]> {
    const records: ChangeRecord[] = [];
    for (const row of await rows<ChangeRow>(this.#poll, this.#changeRows, [tenant, after, upTo, limit])) {
      const stored = toStoredDefinition(tenant, row);
      // Every record names a stored version (definitions are never deleted); a row that is not one is skipped.
      if (stored !== undefined)
        records.push({ revision: fromDatabaseInteger(row.change_revision), kind: row.change_kind, stored });
    }
    return records;
  }

  async heads(tenant: string, after: number, upTo: number, limit: number): Promise<ChangeHead[]> {
    const found = await rows<{ change_revision: DatabaseInteger; bytes: DatabaseInteger }>(this.#poll, this.#headRows, [
      tenant,
      after,
      upTo,
      limit,
    ]);
    return found.map((row) => ({
      revision: fromDatabaseInteger(row.change_revision),
      bytes: fromDatabaseInteger(row.bytes),
    }));
  }

  async oldest(tenant: string): Promise<number | undefined> {
    const [row] = await rows<{ oldest: DatabaseInteger | null }>(this.#run, oldestSql, [tenant]);
    return row?.oldest == null ? undefined : fromDatabaseInteger(row.oldest);
  }

  async compact({ count, maxAgeMs }: Retention, now: Date): Promise<number> {
    // Per tenant, the revision up to which records go: a cut per tenant, never a hole in the middle (a
    // record's time is when its write began, so times are not in revision order).
    const cuts = new Map<string, number>();
    const cut = (tenant: string, upTo: number) => {
      if (upTo > 0) cuts.set(tenant, Math.max(cuts.get(tenant) ?? 0, upTo));
    };
    // Every tenant's revision, and by age its first record written since `before`, read once for both rules.
    // By age, the records before that first young record go: read along the primary key from the oldest
    // record, each tenant's subquery reads what it deletes and one row more, where a MAX(revision) over every
    // record older than `before` read the whole log at every compaction (changed_at has no index). A record
    // older than `before` behind a younger one stays until the next compaction after that one ages.
    const byAge = maxAgeMs > 0;
    const tenants =
      count > 0 || byAge
        ? await rows<{ tenant: string; revision: DatabaseInteger; young: DatabaseInteger | null }>(
            this.#run,
            byAge ? tenantsByAgeSql : tenantsSql,
            byAge ? [toDatabaseTimestamp(new Date(now.getTime() - maxAgeMs))] : [],
          )
        : [];
    for (const row of tenants) {
      const revision = fromDatabaseInteger(row.revision);
      if (count > 0) cut(row.tenant, revision - count);
      if (byAge) cut(row.tenant, row.young == null ? revision : fromDatabaseInteger(row.young) - 1);
    }
    let removed = 0;
    for (const [tenant, upTo] of cuts) removed += await this.#deleteUpTo(tenant, upTo);
    return removed;
  }

  /**
   * Deletes the tenant's records up to `upTo`, oldest first, `batch` revisions per statement (a range of the
   * primary key each: revisions have no gaps below the counter, so a range holds at most `batch` records).
   */
  async #deleteUpTo(tenant: string, upTo: number): Promise<number> {
    let removed = 0;
    for (let from = await this.oldest(tenant); from !== undefined && from <= upTo; from = await this.oldest(tenant)) {
      const to = Math.min(upTo, from + this.#batch - 1);
      const result = await this.#db.raw(`DELETE FROM ${definitionChanges} WHERE tenant = ? AND revision <= ?`, [
        tenant,
        to,
      ]);
      // mysql2: [ResultSetHeader, fields]; better-sqlite3 through knex: { changes } or an array.
      const header = Array.isArray(result) ? result[0] : result;
      removed += Number(header?.affectedRows ?? header?.changes ?? 0);
    }
    return removed;
  }
}

/** The rows `on` answers `sql` with, as `T`. */
async function rows<T>(on: RunRead, sql: string, bindings: readonly unknown[]): Promise<T[]> {
  return (await on(sql, bindings as never)) as unknown as T[];
}
