/**
 * What makes the bench's seeding of its own database fast (issue 24, item 3)
 * without leaving that database other than the service's own writes would:
 *
 * - definition_terms' insert trigger (migration 0010) moves a counter row per
 *   term row: 14 upserts per definition today, 3-4 times more with the word
 *   terms of issue 24, item 1. While the bench seeds, the trigger is dropped,
 *   and each batch's transaction counts the terms it wrote with one
 *   INSERT ... SELECT ... GROUP BY (the statement of 0010's own backfill), so
 *   at every commit the counters are what the trigger would have made them.
 *   The trigger is made again afterwards from the very statement the
 *   database kept for it (information_schema / sqlite_master), so the schema
 *   ends as the migrations made it; the shard expression (`seq % 16`) is read
 *   from that statement too, not copied here.
 * - On SQLite, the seeder's own connection skips the fsyncs
 *   (`synchronous = OFF`) and keeps a larger page cache: settings of one
 *   connection, not of the file, so the service's connections keep theirs.
 *
 * Only a bench database can be loaded this way (benchDatabaseGuard): a MariaDB
 * database named asor_bench..., or the SQLite file of a data dir the bench
 * made under the system's temporary directory (asor-bench-...).
 */
import { tmpdir } from "node:os";
import { basename, dirname, resolve } from "node:path";
import type { Knex } from "knex";
import type { Dialect } from "../src/storage/run/connection.js";
import { parseDatabaseUrl } from "../src/storage/run/connection.js";

/** The per-row counter trigger the seeding suspends. */
export const TERM_COUNT_TRIGGER = "tr_definition_terms_count_insert";

/** A MariaDB database the bench made (bench-database.ts: --database, asor_bench by default). */
const benchDatabaseName = /^asor_bench[a-z0-9_]*$/;

/**
 * Throws unless the database is one of the bench's own throwaway databases;
 * the only way to suspend a trigger below goes through it.
 */
export function benchDatabaseGuard(databaseUrl: string | undefined, dataDir: string): void {
  if (databaseUrl !== undefined && databaseUrl !== "") {
    const name = parseDatabaseUrl(databaseUrl).database;
    if (!benchDatabaseName.test(name))
      throw new Error(`Refusing to bulk-load "${name}": only a bench database (asor_bench...) may be.`);
    return;
  }
  const dir = resolve(dataDir);
  if (dirname(dir) !== resolve(tmpdir()) || !basename(dir).startsWith("asor-bench-"))
    throw new Error(
      `Refusing to bulk-load the SQLite file in ${dataDir}: only a bench data dir (asor-bench-...) may be.`,
    );
}

export interface BulkLoad {
  /**
   * Counts the term rows of seqs `from` to `to` (exclusive) into their counters, as the trigger would have
   * one by one; called inside the transaction that wrote them.
   */
  countTerms(tx: Knex.Transaction, from: number, to: number): Promise<void>;
  /** Makes the trigger again, from its own statement. */
  restore(): Promise<void>;
}

interface SavedTrigger {
  readonly statement: string;
  readonly sqlMode: string | undefined;
}

/**
 * Drops the term counters' insert trigger of a bench database (after
 * benchDatabaseGuard), keeping its statement to make it again. Throws when
 * the trigger is missing: a seeding that died before restore() left the
 * database so, and it must be made afresh (no --reuse).
 */
export async function suspendTermCounting(
  db: Knex,
  dialect: Dialect,
  where: { readonly databaseUrl: string | undefined; readonly dataDir: string },
): Promise<BulkLoad> {
  benchDatabaseGuard(where.databaseUrl, where.dataDir);
  const saved = await savedTrigger(db, dialect);
  const shards = /\bseq % (\d+)/.exec(saved.statement)?.[1];
  if (shards === undefined)
    throw new Error(`The trigger ${TERM_COUNT_TRIGGER} has no "seq % <shards>": ${saved.statement}`);
  const columns = "tenant, kind, value, status, is_latest";
  const add =
    dialect === "mysql"
      ? "ON DUPLICATE KEY UPDATE n = n + VALUES(n)"
      : `ON CONFLICT (${columns}, shard) DO UPDATE SET n = n + excluded.n`;
  const count =
    `INSERT INTO definition_term_counts (${columns}, shard, n) ` +
    `SELECT ${columns}, seq % ${shards}, COUNT(*) FROM definition_terms WHERE seq >= ? AND seq < ? ` +
    `GROUP BY ${columns}, seq % ${shards} ${add}`;
  await db.raw(`DROP TRIGGER ${TERM_COUNT_TRIGGER}`);
  return {
    async countTerms(tx, from, to) {
      await tx.raw(count, [from, to]);
    },
    async restore() {
      if (dialect === "mysql" && saved.sqlMode !== undefined) {
        // One connection for the mode and the statement: the trigger keeps the sql_mode it was made under.
        await db.transaction(async (tx) => {
          await tx.raw("SET SESSION sql_mode = ?", [saved.sqlMode as string]);
          await tx.raw(saved.statement);
        });
      } else await db.raw(saved.statement);
    },
  };
}

async function savedTrigger(db: Knex, dialect: Dialect): Promise<SavedTrigger> {
  if (dialect === "mysql") {
    const [rows] = (await db.raw(`SHOW CREATE TRIGGER ${TERM_COUNT_TRIGGER}`).catch(() => [[]])) as [
      Array<Record<string, string>>,
    ];
    const row = rows[0];
    if (row === undefined) throw missing();
    return { statement: String(row["SQL Original Statement"]), sqlMode: String(row.sql_mode) };
  }
  const rows = (await db.raw("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", [
    TERM_COUNT_TRIGGER,
  ])) as Array<{ sql: string }>;
  const row = rows[0];
  if (row === undefined) throw missing();
  return { statement: row.sql, sqlMode: undefined };
}

const missing = () =>
  new Error(
    `The bench database has no trigger ${TERM_COUNT_TRIGGER}: a seeding that died left it so; ` +
      "start it afresh (without --reuse).",
  );

/**
 * The seeder's own SQLite connection: no fsync per commit and a 256 MiB page
 * cache. Per connection: the file and the service's connections keep their
 * settings (connection.ts: WAL, synchronous = FULL).
 */
export async function fastSqliteConnection(db: Knex): Promise<void> {
  await db.raw("PRAGMA synchronous = OFF");
  await db.raw("PRAGMA cache_size = -262144");
}
