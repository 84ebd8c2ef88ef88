/**
 * Builds the knex instance for the configured database: MySQL/MariaDB when a
 * `mysql://` URL is given, else an embedded SQLite file under the data dir.
 */
import { chmod, mkdir, open } from "node:fs/promises";
import { join } from "node:path";
import type { Knex } from "knex";
import knex from "knex";
import { SEARCH_ALIVE } from "../queries/sql-functions.js";
import { isNodeFailure } from "./driver-errors.js";
import { sqliteClient } from "./sqlite-client.js";

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
  readonly timeoutMillis?: number | undefined;
  /**
   * MySQL: the longest wait for one statement's answer, when it must differ
   * from timeoutMillis (connect and pool waits keep that): the migrations'
   * pool, whose statements rewrite and index whole tables.
   */
  readonly statementTimeoutMillis?: number | undefined;
  /**
   * Galera only: the `wsrep_sync_wait` of every connection (default defaultSyncWait). 1: every read and
   * every BEGIN first waits until the node has applied what the cluster committed before it (causal reads).
   */
  readonly syncWait?: number | undefined;
  /** MySQL: the connections of the pool (default MYSQL_POOL_SIZE). */
  readonly poolSize?: number | undefined;
}

/** A knex instance and the dialect it speaks. */
export interface Database {
  readonly db: Knex;
  readonly dialect: Dialect;
  /** How many database hosts the pool may move between (1 for SQLite and a single host). */
  readonly hosts: number;
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
    const target = parseDatabaseUrl(options.databaseUrl);
    const hosts = new DatabaseHosts(target.hosts.length);
    const db = knex(
      mysqlConfig(
        target,
        hosts,
        timeoutMillis,
        options.statementTimeoutMillis ?? timeoutMillis,
        options.poolSize ?? MYSQL_POOL_SIZE,
      ),
    );
    connectInTurn(db, target, hosts, { timeoutMillis, syncWait: options.syncWait ?? defaultSyncWait });
    return { db, dialect: "mysql", hosts: target.hosts.length };
  }
  // Owner only: the database holds every tenant's definitions. A directory that exists keeps its mode.
  await mkdir(options.dataDir, { recursive: true, mode: 0o700 });
  const filename = join(options.dataDir, sqliteFileName);
  await ownerOnlyDatabaseFiles(filename);
  return { db: knex(sqliteConfig(filename)), dialect: "sqlite", hosts: 1 };
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

/**
 * The hosts of a DATABASE_URL, used one at a time: the pool connects to the current one, and moves to
 * the next (in the URL's order, round) when the current one fails (nodeFailed). Connections to a host
 * that is no longer current are dropped when next taken from the pool (mysqlConfig's validate), so
 * reads and writes move together, without a restart; a host is left only when it fails, never for
 * returning.
 */
export class DatabaseHosts {
  readonly #count: number;
  #current = 0;

  constructor(count: number) {
    this.#count = count;
  }

  /** The index of the host new connections go to. */
  get current(): number {
    return this.#current;
  }

  /** Every host's index, the current one first: the order to try them in. */
  inTurn(): number[] {
    return Array.from({ length: this.#count }, (_, i) => (this.#current + i) % this.#count);
  }

  /** Host `index` failed: when it is the current one, the next one becomes current. */
  failed(index: number): void {
    if (index === this.#current) this.#current = (index + 1) % this.#count;
  }
}

/** The host each pooled connection was made to (DatabaseHosts' index). */
const hostOfConnection = new WeakMap<object, number>();

/**
 * Makes the pool's connection factory try the hosts in turn, the current one first: a host that
 * refuses, times out (connectTimeout, once) or is a Galera node not ready for queries (wsrep_ready
 * OFF: joining, or out of the primary component; it answers every query on a table with error 1047)
 * is marked failed and the next is tried. Errors that are not the node's (a wrong password) end the
 * attempt as they are.
 */
function connectInTurn(
  db: Knex,
  target: MysqlTarget,
  hosts: DatabaseHosts,
  galera: { timeoutMillis: number; syncWait: number },
): void {
  const client = db.client as unknown as {
    acquireRawConnection(): Promise<MysqlConnection>;
    connectionSettings: { host: string; port: number };
  };
  const connect = client.acquireRawConnection.bind(client);
  client.acquireRawConnection = async () => {
    let failure: unknown;
    for (const index of hosts.inTurn()) {
      const { host, port } = target.hosts[index] as DatabaseHost;
      // knex's mysql dialect reads the settings synchronously when it creates the connection.
      client.connectionSettings.host = host;
      client.connectionSettings.port = port;
      try {
        const connection = await connect();
        hostOfConnection.set(connection, index);
        await checkNodeReady(connection, galera, `${host}:${port}`);
        return connection;
      } catch (error) {
        if (!isNodeFailure(error)) throw error;
        hosts.failed(index);
        failure = error;
      }
    }
    throw failure;
  };
}

/**
 * Galera only (wsrep_on; a MariaDB without a cluster has wsrep_ready OFF, MySQL neither): refuses a node
 * that is not ready for queries, with the error such a node answers a query on a table with (1047),
 * after closing the connection; on a ready node, sets the session's wsrep_sync_wait (StorageOptions.syncWait).
 */
async function checkNodeReady(
  connection: MysqlConnection,
  { timeoutMillis, syncWait }: { timeoutMillis: number; syncWait: number },
  where: string,
): Promise<void> {
  const value = (sql: string) =>
    new Promise<string | undefined>((resolve, reject) =>
      connection.query({ sql, timeout: timeoutMillis }, (error: Error | null, rows: Array<{ Value?: string }>) =>
        error === null ? resolve(rows[0]?.Value) : reject(error),
      ),
    );
  try {
    if ((await value("SHOW GLOBAL VARIABLES LIKE 'wsrep_on'")) !== "ON") return;
    const ready = await value("SHOW GLOBAL STATUS LIKE 'wsrep_ready'");
    if (ready === "ON") {
      // The server's default is 0; a bitmask of at most 15, checked by config.ts, bound as a literal.
      await value(`SET SESSION wsrep_sync_wait = ${Math.trunc(syncWait)}`);
      return;
    }
    throw Object.assign(new Error(`The Galera node at ${where} is not ready for queries (wsrep_ready=${ready}).`), {
      code: "ER_UNKNOWN_COM_ERROR",
      errno: 1047,
    });
  } catch (error) {
    connection.stream.destroy();
    throw error;
  }
}

function mysqlConfig(
  target: MysqlTarget,
  hosts: DatabaseHosts,
  timeoutMillis: number,
  statementTimeoutMillis: number,
  poolSize: number,
): Knex.Config {
  const [first] = target.hosts;
  return {
    client: "mysql2",
    connection: {
      host: first?.host,
      port: first?.port,
      user: target.user,
      password: target.password,
      ...(target.database === "" ? {} : { database: target.database }),
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
      max: poolSize,
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
                if (isolationError === null) withStatementTimeout(connection, statementTimeoutMillis, hosts);
                done(isolationError, connection);
              },
            );
          },
        );
      },
      // A connection to a host the pool has left (DatabaseHosts) is closed instead of used.
      validate: (connection: object) => hostOfConnection.get(connection) === hosts.current,
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
 * Gives every statement on `connection` mysql2's inactivity timeout, and marks the connection's host
 * failed (DatabaseHosts) when a statement fails as a failed node does (isNodeFailure). On a
 * timeout mysql2 fails the statement but keeps waiting for the server's answer
 * on the connection, so the ROLLBACK that follows would queue behind it and
 * hang as long: the socket is closed instead, which fails whatever is queued
 * at once, makes the server roll back the open transaction, and makes the
 * pool drop the connection.
 */
function withStatementTimeout(connection: MysqlConnection, timeoutMillis: number, hosts: DatabaseHosts): void {
  const query = connection.query.bind(connection);
  connection.query = (sql, ...rest) => {
    const options = typeof sql === "string" ? { sql, timeout: timeoutMillis } : { timeout: timeoutMillis, ...sql };
    const callback = rest.at(-1);
    if (typeof callback === "function") {
      rest[rest.length - 1] = ((error, ...results) => {
        if (error?.code === "PROTOCOL_SEQUENCE_TIMEOUT") connection.stream.destroy();
        if (error !== null && isNodeFailure(error)) hosts.failed(hostOfConnection.get(connection) ?? -1);
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
