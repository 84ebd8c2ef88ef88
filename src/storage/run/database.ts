/**
 * What names the registry's database: the dialects, the storage options a process is given, what a
 * DATABASE_URL names, and the defaults. Imports nothing of the registry, so that connection.ts and the MySQL pool
 * (mysql-pool.ts) both build on it.
 */
import type { Knex } from "knex";

/** Which SQL dialect a knex instance speaks; queries branch on it where the two differ. */
export type Dialect = "mysql" | "sqlite";

/** Where the registry keeps its data. */
export interface StorageOptions {
  /**
   * `mysql://user:password@host:port/database`, or several hosts (`@h1:3306,h2:3306,h3:3306`: the nodes of
   * a Galera cluster, used one at a time, DatabaseHosts); absent means embedded SQLite.
   */
  readonly databaseUrl?: string | undefined;
  /**
   * MySQL only: where the writes go instead (every write transaction, a tenant's creation, the migrations),
   * one host or several as databaseUrl, on a pool of its own; reads stay on databaseUrl. The same value on
   * every replica sends all writes through one node of a Galera cluster (single-writer). Absent: databaseUrl.
   */
  readonly databaseWriteUrl?: string | undefined;
  /** Directory for the SQLite file (created if missing); unused with MySQL. */
  readonly dataDir: string;
  /**
   * MySQL: the longest connect, pool acquire, or wait for one statement's
   * answer, in milliseconds (default 10000). Past it the call fails as
   * unavailable instead of hanging on a database that stopped answering.
   */
  readonly timeoutMs?: number | undefined;
  /**
   * MySQL: the longest wait for one statement's answer, when it must differ
   * from timeoutMs (connect and pool waits keep that): the migrations'
   * pool, whose statements rewrite and index whole tables.
   */
  readonly statementTimeoutMs?: number | undefined;
  /**
   * Galera only: the `wsrep_sync_wait` of every connection (default defaultSyncWait). 1: every read and
   * every BEGIN first waits until the node has applied what the cluster committed before it (causal reads).
   */
  readonly syncWait?: number | undefined;
  /** MySQL: the connections of the pool (default MYSQL_POOL_SIZE). */
  readonly poolSize?: number | undefined;
  /**
   * SQLite: how often a worker thread checkpoints the WAL (sqlite-checkpointer.ts), in milliseconds; the
   * writer's connection then checkpoints only past a hard cap. 0: the writer checkpoints on every COMMIT that
   * takes the WAL past 1,000 pages, on the event loop (SQLite's default). Absent:
   * defaultSqliteCheckpointIntervalMs (`SQLITE_CHECKPOINT_INTERVAL_MS`).
   */
  readonly checkpointIntervalMs?: number | undefined;
}

/** A knex instance and the dialect it speaks. */
export interface Database {
  readonly db: Knex;
  readonly dialect: Dialect;
  /** How many database hosts the pool may move between (1 for SQLite and a single host). */
  readonly hosts: number;
  /**
   * SQLite: its file, and how often a thread checkpoints its WAL (StorageOptions.checkpointIntervalMs; 0 for
   * never: the writer's COMMITs do). The write transactions' runner starts the thread (sql-writer.ts).
   */
  readonly sqlite?: { readonly filename: string; readonly checkpointIntervalMs: number } | undefined;
}

/** One host of a DATABASE_URL. */
export interface DatabaseHost {
  readonly host: string;
  readonly port: number;
}

/** What a mysql:// DATABASE_URL names. */
export interface MysqlTarget {
  /** One or more, in the URL's order. */
  readonly hosts: readonly DatabaseHost[];
  readonly user: string;
  readonly password: string;
  /** Empty when the URL names none. */
  readonly database: string;
}

/**
 * Parses `mysql://user:password@host[:port][,host[:port]...]/database` (or `mariadb://`); the port is 3306
 * when left out, IPv6 hosts are bracketed. WHATWG URL parsing refuses several `host:port` pairs, so the
 * hosts are split off first and each parsed as a URL of its own. Throws an Error that says what is wrong.
 */
export function parseDatabaseUrl(databaseUrl: string): MysqlTarget {
  const parts = /^([a-z][a-z0-9+.-]*:)\/\/(?:([^@/?#]*)@)?([^/?#]*)(.*)$/i.exec(databaseUrl);
  if (parts === null) throw new Error("is not a URL (expected mysql://user:password@host:port/database)");
  const [, scheme = "", userinfo, hostList = "", rest = ""] = parts;
  if (scheme.toLowerCase() !== "mysql:" && scheme.toLowerCase() !== "mariadb:")
    throw new Error(`must be a mysql:// URL, not ${scheme}//...`);
  const hosts = hostList.split(",").map((one) => {
    let url: URL;
    try {
      url = new URL(`mysql://${one}`);
    } catch {
      throw new Error(`names a host that is not one: "${one}" (expected host or host:port)`);
    }
    if (url.hostname === "" || url.username !== "" || url.password !== "")
      throw new Error(`names a host that is not one: "${one}" (expected host or host:port)`);
    return { host: url.hostname.replace(/^\[(.*)\]$/, "$1"), port: url.port === "" ? 3306 : Number(url.port) };
  });
  let url: URL;
  try {
    url = new URL(`mysql://${userinfo === undefined ? "" : `${userinfo}@`}localhost${rest}`);
  } catch {
    throw new Error("is not a URL (expected mysql://user:password@host:port/database)");
  }
  return {
    hosts,
    user: decodeURIComponent(url.username),
    password: decodeURIComponent(url.password),
    database: decodeURIComponent(url.pathname.replace(/^\//, "")),
  };
}

/** The SQLite file inside the data dir. */
export const sqliteFileName = "registry.sqlite";

/** The default of StorageOptions.syncWait (DATABASE_SYNC_WAIT): causal reads and write transactions. */
export const defaultSyncWait = 1;

/** The default of StorageOptions.timeoutMs. */
export const defaultTimeoutMs = 10_000;

/** Connections of the MySQL pool; config.ts keeps SEARCH_MAX_CONCURRENT below it. */
export const MYSQL_POOL_SIZE = 10;
