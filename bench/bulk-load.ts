/**
 * What makes the bench's seeding of its own database fast (issue 24, item 3)
 * without leaving that database other than the service's own writes would:
 *
 * - definition_terms' insert trigger (migration 0010) moves a counter row per
 *   term row: 14 upserts per definition today, 3-4 times more with the word
 *   terms of issue 24, item 1; agent_definitions' insert trigger (0009) moves
 *   one of definition_counts' rows per definition, the same few rows for a
 *   whole batch, which would make two batches written at once wait for each
 *   other's COMMIT. While the bench seeds, both triggers are dropped, and each
 *   batch's transaction counts what it wrote with one
 *   INSERT ... SELECT ... GROUP BY per counter table (the statement of 0010's
 *   own backfill), so at every commit the counters (and their versions, of
 *   migration 0017) are what the triggers would have made them. The
 *   triggers are made again afterwards from the
 *   very statements the database kept for them (information_schema /
 *   sqlite_master), so the schema ends as the migrations made it; the shard
 *   expression (`seq % 16`) is read from those statements too, not copied here.
 * - On SQLite, definition_terms' lookup index (tenant, kind, value, seq,
 *   status, is_latest; migration 0009) is dropped too and built once after
 *   the rows, by sorting: ~58 index entries per definition, inserted into ~58
 *   places of the index at once, were most of the seeding's time. (Not on
 *   MariaDB, where building it cost more: buildsIndexAfter.) Made again from
 *   the database's own statement
 *   (sqlite_master; the line of SHOW CREATE TABLE on MySQL). What is
 *   suspended is recorded first in a table of its own (SUSPENDED_TABLE), so a
 *   seeding that dies leaves a record, and the next top-up makes it again
 *   before anything else, even one that adds nothing.
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

/** The per-row counter triggers the seeding suspends: definition_terms' and agent_definitions' inserts'. */
export const TERM_COUNT_TRIGGER = "tr_definition_terms_count_insert";
export const DEFINITION_COUNT_TRIGGER = "tr_agent_definitions_search_insert";

/**
 * What each suspended trigger counted, counted again for a range of seqs: its counter table, the rows it counts
 * and the columns it counts by.
 */
const COUNTED: Readonly<Record<string, { counters: string; rows: string; columns: string }>> = {
  [TERM_COUNT_TRIGGER]: {
    counters: "definition_term_counts",
    rows: "definition_terms",
    columns: "tenant, kind, value, status, is_latest",
  },
  [DEFINITION_COUNT_TRIGGER]: {
    counters: "definition_counts",
    rows: "agent_definitions",
    columns: "tenant, status, is_latest",
  },
};
const COUNT_TRIGGERS: readonly string[] = Object.keys(COUNTED);

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
   * Counts the definitions and term rows of seqs `from` to `to` (exclusive) into their counters, as the
   * triggers would have one by one; called inside the transaction that wrote them.
   */
  count(tx: Knex.Transaction, from: number, to: number): Promise<void>;
  /** Makes the triggers and the lookup index again, from their own statements. */
  restore(): Promise<void>;
}

/** The lookup index of definition_terms (migration 0009) that the seeding builds once, after the rows. */
export const TERM_LOOKUP_INDEX = "ix_definition_terms_lookup";

/**
 * Whether the seeding drops the lookup index and builds it once after the rows. SQLite: yes (a million
 * 985.6 s -> 535.7 s). MariaDB: no: its inserts into the index cost less than building it over 58 million
 * rows (269.5 s with a 1 MiB sort buffer): a million took 1,183.8 s dropped, 941.0 s kept (BENCHMARKS.md,
 * "Issue 24, item 3"). Both paths make the same schema; the MySQL one stays for a server with more memory.
 */
const buildsIndexAfter: Readonly<Record<Dialect, boolean>> = { sqlite: true, mysql: false };

/**
 * Where a seeding keeps the statements of what it suspended until it has made them again: a seeding that
 * died in between leaves them there, and the next one (or the next top-up that adds nothing) makes them
 * from it. Dropped by restore(), so the schema ends as the migrations made it.
 */
export const SUSPENDED_TABLE = "bench_bulk_load_suspended";

/** One object the seeding suspends: the statement that makes it, and (MySQL) the sql_mode to make it in. */
interface Suspended {
  readonly name: string;
  readonly statement: string;
  readonly sqlMode: string | null;
}

/**
 * Drops the counters' insert triggers and (SQLite) definition_terms' lookup
 * index of a bench database (after benchDatabaseGuard), keeping their
 * statements (in memory and in SUSPENDED_TABLE) to make them again. First
 * makes again what a seeding that died left suspended. Throws when a
 * trigger or the index is missing with no record of it: the database must be
 * made afresh (no --reuse).
 */
export async function suspendForBulkLoad(
  db: Knex,
  dialect: Dialect,
  where: { readonly databaseUrl: string | undefined; readonly dataDir: string },
): Promise<BulkLoad> {
  benchDatabaseGuard(where.databaseUrl, where.dataDir);
  await restoreInterrupted(db, dialect);
  const triggers: Suspended[] = [];
  for (const name of COUNT_TRIGGERS) triggers.push(await savedTrigger(db, dialect, name));
  const saved = buildsIndexAfter[dialect] ? [...triggers, await savedIndex(db, dialect)] : triggers;
  const counts = triggers.map(({ name, statement }) => {
    const shards = /\bseq % (\d+)/.exec(statement)?.[1];
    if (shards === undefined) throw new Error(`The trigger ${name} has no "seq % <shards>": ${statement}`);
    const { counters, rows, columns } = COUNTED[name]!;
    // Migration 0017's triggers also move each counter row's version `v` by one per row counted.
    const versioned = /\bv = v \+ 1\b/.test(statement);
    const add =
      dialect === "mysql"
        ? `ON DUPLICATE KEY UPDATE n = n + VALUES(n)${versioned ? ", v = v + VALUES(v)" : ""}`
        : `ON CONFLICT (${columns}, shard) DO UPDATE SET n = n + excluded.n${versioned ? ", v = v + excluded.v" : ""}`;
    return (
      `INSERT INTO ${counters} (${columns}, shard, n${versioned ? ", v" : ""}) ` +
      `SELECT ${columns}, seq % ${shards}, COUNT(*)${versioned ? ", COUNT(*)" : ""} FROM ${rows} ` +
      "WHERE seq >= ? AND seq < ? " +
      `GROUP BY ${columns}, seq % ${shards} ${add}`
    );
  });
  // The record first (committed), then the drops: a seeding that dies at any point leaves nothing dropped
  // without a record of how to make it again.
  await db.raw(
    `CREATE TABLE ${SUSPENDED_TABLE} (name VARCHAR(64) NOT NULL PRIMARY KEY, statement TEXT NOT NULL, sql_mode TEXT)`,
  );
  await db(SUSPENDED_TABLE).insert(saved.map((s) => ({ name: s.name, statement: s.statement, sql_mode: s.sqlMode })));
  for (const name of COUNT_TRIGGERS) await db.raw(`DROP TRIGGER ${name}`);
  if (buildsIndexAfter[dialect])
    await db.raw(
      dialect === "mysql"
        ? `ALTER TABLE definition_terms DROP INDEX ${TERM_LOOKUP_INDEX}`
        : `DROP INDEX ${TERM_LOOKUP_INDEX}`,
    );
  return {
    async count(tx, from, to) {
      for (const sql of counts) await tx.raw(sql, [from, to]);
    },
    async restore() {
      await makeAgain(db, dialect, saved);
      await db.schema.dropTable(SUSPENDED_TABLE);
    },
  };
}

/**
 * Makes again what a seeding that died left suspended (SUSPENDED_TABLE), and drops the record; answers
 * the names it made. Nothing when no seeding died.
 */
export async function restoreInterrupted(db: Knex, dialect: Dialect): Promise<string[]> {
  if (!(await db.schema.hasTable(SUSPENDED_TABLE))) return [];
  const rows = (await db(SUSPENDED_TABLE).select(["name", "statement", "sql_mode"])) as Array<{
    name: string;
    statement: string;
    sql_mode: string | null;
  }>;
  const made = await makeAgain(
    db,
    dialect,
    rows.map((r) => ({ name: r.name, statement: r.statement, sqlMode: r.sql_mode })),
  );
  await db.schema.dropTable(SUSPENDED_TABLE);
  return made;
}

/** Makes each of `saved` that is missing, by its statement; answers the names made. */
async function makeAgain(db: Knex, dialect: Dialect, saved: readonly Suspended[]): Promise<string[]> {
  const made: string[] = [];
  for (const { name, statement, sqlMode } of saved) {
    if (await exists(db, dialect, name)) continue;
    if (dialect === "mysql" && sqlMode !== null) {
      // One connection for the mode and the statement: a trigger keeps the sql_mode it was made under.
      await db.transaction(async (tx) => {
        await tx.raw("SET SESSION sql_mode = ?", [sqlMode]);
        await tx.raw(statement);
      });
    } else await db.raw(statement);
    made.push(name);
  }
  return made;
}

/** Whether the trigger or index `name` exists. */
async function exists(db: Knex, dialect: Dialect, name: string): Promise<boolean> {
  if (dialect === "mysql") {
    const [rows] = (await db.raw(
      COUNT_TRIGGERS.includes(name)
        ? "SELECT 1 FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = ?"
        : "SELECT 1 FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND INDEX_NAME = ?",
      [name],
    )) as [unknown[]];
    return rows.length > 0;
  }
  return ((await db.raw("SELECT 1 FROM sqlite_master WHERE name = ?", [name])) as unknown[]).length > 0;
}

async function savedTrigger(db: Knex, dialect: Dialect, name: string): Promise<Suspended> {
  if (dialect === "mysql") {
    const [rows] = (await db.raw(`SHOW CREATE TRIGGER ${name}`).catch(() => [[]])) as [Array<Record<string, string>>];
    const row = rows[0];
    if (row === undefined) throw missing(name);
    return { name, statement: String(row["SQL Original Statement"]), sqlMode: String(row.sql_mode) };
  }
  return { name, statement: await sqliteStatement(db, name), sqlMode: null };
}

/**
 * The lookup index's statement: on SQLite as kept in sqlite_master; on MySQL its line of SHOW CREATE
 * TABLE, added back by ALTER TABLE (InnoDB builds it by sorting the rows, as SQLite's CREATE INDEX does).
 */
async function savedIndex(db: Knex, dialect: Dialect): Promise<Suspended> {
  if (dialect === "sqlite")
    return { name: TERM_LOOKUP_INDEX, statement: await sqliteStatement(db, TERM_LOOKUP_INDEX), sqlMode: null };
  const [[row]] = (await db.raw("SHOW CREATE TABLE definition_terms")) as [Array<Record<string, string>>];
  const line = new RegExp(`^\\s*(KEY \`${TERM_LOOKUP_INDEX}\` \\(.*\\)),?$`, "m").exec(
    String(row?.["Create Table"]),
  )?.[1];
  if (line === undefined) throw missing(TERM_LOOKUP_INDEX);
  return { name: TERM_LOOKUP_INDEX, statement: `ALTER TABLE definition_terms ADD ${line}`, sqlMode: null };
}

async function sqliteStatement(db: Knex, name: string): Promise<string> {
  const rows = (await db.raw("SELECT sql FROM sqlite_master WHERE name = ?", [name])) as Array<{ sql: string }>;
  const row = rows[0];
  if (row === undefined) throw missing(name);
  return row.sql;
}

const missing = (name: string) =>
  new Error(
    `The bench database has no ${name}, and no record of a seeding that suspended it; ` +
      "start it afresh (without --reuse).",
  );

/**
 * Checks a bench database after a seeding: the triggers, the lookup index and definition_terms' foreign key
 * are there, and the counters add up to the rows they count (the tenant's terms, its definitions).
 */
export async function checkAfterBulkLoad(db: Knex, dialect: Dialect, tenant: string): Promise<void> {
  for (const name of [...COUNT_TRIGGERS, TERM_LOOKUP_INDEX])
    if (!(await exists(db, dialect, name))) throw new Error(`After seeding, ${name} is missing.`);
  const foreignKeys =
    dialect === "mysql"
      ? (
          (await db.raw(
            "SELECT 1 FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = DATABASE() " +
              "AND TABLE_NAME = 'definition_terms' AND REFERENCED_TABLE_NAME = 'agent_definitions'",
          )) as [unknown[]]
        )[0]
      : ((await db.raw(
          "SELECT 1 FROM pragma_foreign_key_list('definition_terms') WHERE \"table\" = 'agent_definitions'",
        )) as unknown[]);
  if (foreignKeys.length !== 1) throw new Error("After seeding, definition_terms' foreign key is missing.");
  const pairs = [
    ["definition_term_counts", "definition_terms"],
    ["definition_counts", "agent_definitions"],
  ] as const;
  for (const [counters, rows] of pairs) {
    const sum = (await db(counters).where({ tenant }).sum({ n: "n" }).first()) as { n: number | string | null };
    const all = (await db(rows).where({ tenant }).count({ n: "*" }).first()) as { n: number | string };
    if (Number(sum.n ?? 0) !== Number(all.n))
      throw new Error(`After seeding, SUM(n) of ${counters} is ${sum.n} and COUNT(*) of ${rows} is ${all.n}.`);
  }
}

/**
 * The seeder's own SQLite connection: no fsync per commit and a 256 MiB page
 * cache. Per connection: the file and the service's connections keep their
 * settings (connection.ts: WAL, synchronous = FULL).
 */
export async function fastSqliteConnection(db: Knex): Promise<void> {
  await db.raw("PRAGMA synchronous = OFF");
  await db.raw("PRAGMA cache_size = -262144");
}
