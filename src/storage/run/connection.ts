/**
 * Builds the knex instance for the configured database: MySQL/MariaDB when a
 * `mysql://` URL is given, else an embedded SQLite file under the data dir.
 */
import { chmod, mkdir, open } from "node:fs/promises";
import { join } from "node:path";
import type { Knex } from "knex";
import knex from "knex";
import { SEARCH_ALIVE } from "../queries/sql-functions.js";
import { sqliteClient } from "./sqlite-client.js";

/** Which SQL dialect a knex instance speaks; queries branch on it where the two differ. */
export type Dialect = "mysql" | "sqlite";

/** Where the registry keeps its data. */
export interface StorageOptions {
  /** `mysql://user:password@host:port/database`; absent means embedded SQLite. */
  readonly databaseUrl?: string | undefined;
  /** Directory for the SQLite file (created if missing); unused with MySQL. */
  readonly dataDir: string;
  /**
   * MySQL: the longest connect, pool acquire, or wait for one statement's
   * answer, in milliseconds (default 10000). Past it the call fails as
   * unavailable instead of hanging on a database that stopped answering.
   */
  readonly timeoutMillis?: number | undefined;
  /**
   * MySQL: the longest wait for one statement's answer, when it must differ
   * from timeoutMillis (connect and pool waits keep that): the migrations'
   * pool, whose statements rewrite and index whole tables.
   */
  readonly statementTimeoutMillis?: number | undefined;
}

/** A knex instance and the dialect it speaks. */
export interface Database {
  readonly db: Knex;
  readonly dialect: Dialect;
}

/** The SQLite file inside the data dir. */
export const sqliteFileName = "registry.sqlite";

/** The default of StorageOptions.timeoutMillis. */
export const defaultTimeoutMillis = 10_000;

/**
 * How long a statement waits for a row lock before MySQL gives up (its default, 50 s, outlives
 * any HTTP client): half the statement timeout, so a lock wait ends as a retryable
 * ER_LOCK_WAIT_TIMEOUT before the statement timeout would take the database for gone.
 */
function lockWaitTimeoutSeconds(timeoutMillis: number): number {
  return Math.max(1, Math.floor(timeoutMillis / 2000));
}

/** Connections of the MySQL pool; config.ts keeps SEARCH_MAX_CONCURRENT below it. */
export const MYSQL_POOL_SIZE = 10;

/** The MySQL-dialect server's VERSION(). */
export async function serverVersion(db: Knex): Promise<string> {
  // knex.raw on mysql2 answers [rows, fields].
  const [rows] = (await db.raw("SELECT VERSION() AS version")) as [Array<{ version: string }>, unknown];
  return rows[0]?.version ?? "";
}

/** Whether a VERSION() is MariaDB's (which spells some things differently from MySQL 8). */
export function isMariaDb(version: string): boolean {
  return /mariadb/i.test(version);
}

/** Opens (lazily: the pool connects on first use) the database described by `options`. */
export async function openDatabase(options: StorageOptions): Promise<Database> {
  if (options.databaseUrl !== undefined && options.databaseUrl !== "") {
    const timeoutMillis = options.timeoutMillis ?? defaultTimeoutMillis;
    return {
      db: knex(mysqlConfig(options.databaseUrl, timeoutMillis, options.statementTimeoutMillis ?? timeoutMillis)),
      dialect: "mysql",
    };
  }
  // Owner only: the database holds every tenant's definitions. A directory that exists keeps its mode.
  await mkdir(options.dataDir, { recursive: true, mode: 0o700 });
  const filename = join(options.dataDir, sqliteFileName);
  await ownerOnlyDatabaseFiles(filename);
  return { db: knex(sqliteConfig(filename)), dialect: "sqlite" };
}

/**
 * Makes the SQLite file readable and writable by its owner only (0600)
 * before SQLite opens it: SQLite gives the -wal and -shm files it creates
 * the mode of the database file. Files an earlier version left 0644 are
 * narrowed; one owned by another user keeps its mode (it cannot be changed).
 */
async function ownerOnlyDatabaseFiles(filename: string): Promise<void> {
  // "a" creates a missing file (an empty file is an empty database) and never truncates one.
  await (await open(filename, "a", 0o600)).close();
  for (const file of [filename, `${filename}-wal`, `${filename}-shm`]) {
    await chmod(file, 0o600).catch((error: unknown) => {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== "ENOENT" && code !== "EPERM") throw error;
    });
  }
}

function mysqlConfig(databaseUrl: string, timeoutMillis: number, statementTimeoutMillis: number): Knex.Config {
  const url = new URL(databaseUrl);
  if (url.protocol !== "mysql:" && url.protocol !== "mariadb:") {
    throw new Error(`Unsupported database URL scheme "${url.protocol}": expected mysql://`);
  }
  const database = decodeURIComponent(url.pathname.replace(/^\//, ""));
  return {
    client: "mysql2",
    connection: {
      host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
      port: url.port === "" ? 3306 : Number(url.port),
      user: decodeURIComponent(url.username),
      password: decodeURIComponent(url.password),
      ...(database === "" ? {} : { database }),
      // utf8mb4 so 4-byte characters (emoji) survive; the key columns carry their own binary collation.
      charset: "utf8mb4",
      connectTimeout: timeoutMillis,
      // DATETIME as the server's text, read as UTC by rows.ts: no driver-local time zone involved.
      dateStrings: true,
      timezone: "Z",
      supportBigNumbers: true,
    },
    pool: {
      min: 0,
      max: MYSQL_POOL_SIZE,
      afterCreate(connection: MysqlConnection, done: (error: Error | null, connection: unknown) => void) {
        // Strict mode so an over-long value fails instead of being truncated into a different key.
        connection.query(
          `SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'STRICT_ALL_TABLES'), SESSION ` +
            `innodb_lock_wait_timeout = ${lockWaitTimeoutSeconds(statementTimeoutMillis)}, time_zone = '+00:00'`,
          (error: Error | null) => {
            if (error !== null) return done(error, connection);
            // READ COMMITTED for the write transactions (sql-repository.ts says why), set here once
            // instead of by a statement before every BEGIN (run/writes.ts). It changes nothing for
            // the other statements, each a transaction of its own: either level reads a statement's
            // rows as committed when it started.
            connection.query(
              "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
              (isolationError: Error | null) => {
                if (isolationError === null) withStatementTimeout(connection, statementTimeoutMillis);
                done(isolationError, connection);
              },
            );
          },
        );
      },
    },
    acquireConnectionTimeout: timeoutMillis,
  };
}

type QueryCallback = (error: (Error & { code?: unknown }) | null, ...results: unknown[]) => void;

interface MysqlConnection {
  query(sql: string | Record<string, unknown>, ...rest: unknown[]): unknown;
  readonly stream: { destroy(): void };
}

/**
 * Gives every statement on `connection` mysql2's inactivity timeout. On a
 * timeout mysql2 fails the statement but keeps waiting for the server's answer
 * on the connection, so the ROLLBACK that follows would queue behind it and
 * hang as long: the socket is closed instead, which fails whatever is queued
 * at once, makes the server roll back the open transaction, and makes the
 * pool drop the connection.
 */
function withStatementTimeout(connection: MysqlConnection, timeoutMillis: number): void {
  const query = connection.query.bind(connection);
  connection.query = (sql, ...rest) => {
    const options = typeof sql === "string" ? { sql, timeout: timeoutMillis } : { timeout: timeoutMillis, ...sql };
    const callback = rest.at(-1);
    if (typeof callback === "function") {
      rest[rest.length - 1] = ((error, ...results) => {
        if (error?.code === "PROTOCOL_SEQUENCE_TIMEOUT") connection.stream.destroy();
        (callback as QueryCallback)(error, ...results);
      }) satisfies QueryCallback;
    }
    return query(options, ...rest);
  };
}

interface SqliteConnection {
  pragma(source: string): unknown;
  function(name: string, options: { deterministic: boolean }, fn: () => unknown): unknown;
}

function sqliteConfig(filename: string): Knex.Config {
  return {
    // better-sqlite3 under Node, node:sqlite under Deno (sqlite-client.ts).
    client: sqliteClient(),
    connection: { filename },
    useNullAsDefault: true,
    // One connection: SQLite has one writer anyway, and transactions then queue in the pool
    // instead of failing with SQLITE_BUSY against each other.
    pool: {
      min: 1,
      max: 1,
      afterCreate(connection: SqliteConnection, done: (error: Error | null, connection: unknown) => void) {
        try {
          connection.pragma("journal_mode = WAL");
          connection.pragma("foreign_keys = ON");
          connection.pragma("busy_timeout = 5000");
          // FULL: a commit is on disk when it is acknowledged. NORMAL (WAL's usual setting) can lose
          // the last commits on power loss; FULL costs an fsync per commit (BENCHMARKS.md).
          connection.pragma("synchronous = FULL");
          // The searches' cancellation point: always alive here (a search worker's own stops, sqlite-client.ts).
          connection.function(SEARCH_ALIVE, { deterministic: false }, () => 1);
          done(null, connection);
        } catch (error) {
          done(error as Error, connection);
        }
      },
    },
    acquireConnectionTimeout: 30_000,
  };
}
