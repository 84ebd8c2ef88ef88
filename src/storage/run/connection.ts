/**
 * Builds the knex instance for the configured database: MySQL/MariaDB when a
 * `mysql://` URL is given (its pool: mysql-pool.ts), else an embedded SQLite
 * file under the data dir.
 */
import { chmod, mkdir, open } from "node:fs/promises";
import { join } from "node:path";
import type { Knex } from "knex";
import knex from "knex";
import { SEARCH_ALIVE } from "../queries/sql-functions.js";
import {
  type Database,
  defaultSyncWait,
  defaultTimeoutMs,
  MYSQL_POOL_SIZE,
  parseDatabaseUrl,
  type StorageOptions,
  sqliteFileName,
} from "./database.js";
import { connectInTurn, DatabaseHosts, mysqlConfig } from "./mysql-pool.js";
import { defaultSqliteCheckpointIntervalMs, SQLITE_WAL_HARD_CAP_BYTES } from "./sqlite-checkpointer.js";
import { sqliteClient } from "./sqlite-client.js";

export type { Database, DatabaseHost, Dialect, MysqlTarget, StorageOptions } from "./database.js";
export {
  defaultSyncWait,
  defaultTimeoutMs,
  MYSQL_POOL_SIZE,
  parseDatabaseUrl,
  sqliteFileName,
} from "./database.js";
export { DatabaseHosts } from "./mysql-pool.js";

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
    const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
    const target = parseDatabaseUrl(options.databaseUrl);
    const hosts = new DatabaseHosts(target.hosts.length);
    const db = knex(
      mysqlConfig(
        target,
        hosts,
        timeoutMs,
        options.statementTimeoutMs ?? timeoutMs,
        options.poolSize ?? MYSQL_POOL_SIZE,
      ),
    );
    connectInTurn(db, target, hosts, { timeoutMs, syncWait: options.syncWait ?? defaultSyncWait });
    return { db, dialect: "mysql", hosts: target.hosts.length };
  }
  // Owner only: the database holds every tenant's definitions. A directory that exists keeps its mode.
  await mkdir(options.dataDir, { recursive: true, mode: 0o700 });
  const filename = join(options.dataDir, sqliteFileName);
  await ownerOnlyDatabaseFiles(filename);
  const checkpointIntervalMs = options.checkpointIntervalMs ?? defaultSqliteCheckpointIntervalMs;
  const walAutocheckpointBytes = checkpointIntervalMs > 0 ? SQLITE_WAL_HARD_CAP_BYTES : undefined;
  const db = knex(sqliteConfig(filename, walAutocheckpointBytes));
  return { db, dialect: "sqlite", hosts: 1, sqlite: { filename, checkpointIntervalMs } };
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

interface SqliteConnection {
  pragma(source: string): unknown;
  function(name: string, options: { deterministic: boolean }, fn: () => unknown): unknown;
}

/**
 * `walAutocheckpointBytes`: the WAL's size past which a COMMIT of this connection checkpoints it, when a
 * checkpoint thread does it otherwise (sqlite-checkpointer.ts); absent, SQLite's default (1,000 pages).
 */
function sqliteConfig(filename: string, walAutocheckpointBytes: number | undefined): Knex.Config {
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
          if (walAutocheckpointBytes !== undefined) {
            // The checkpoints run on a thread; this one is the backstop should it stall (sqlite-checkpointer.ts).
            const [row] = connection.pragma("page_size") as Array<{ page_size?: number }>;
            const pageSize = Number(row?.page_size ?? 4096);
            connection.pragma(`wal_autocheckpoint = ${Math.ceil(walAutocheckpointBytes / pageSize)}`);
          }
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
