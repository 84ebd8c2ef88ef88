/**
 * The MySQL/MariaDB pool: its connections' settings, the hosts of a DATABASE_URL used one at a time
 * (DatabaseHosts: the nodes of a Galera cluster), each statement's time limit, and a Galera node's
 * readiness checked at connect.
 */
import type { Knex } from "knex";
import type { DatabaseHost, MysqlTarget } from "./database.js";
import { isNodeFailure } from "./driver-errors.js";

/**
 * How long a statement waits for a row lock before MySQL gives up (its default, 50 s, outlives
 * any HTTP client): half the statement timeout, so a lock wait ends as a retryable
 * ER_LOCK_WAIT_TIMEOUT before the statement timeout would take the database for gone.
 */
function lockWaitTimeoutSeconds(timeoutMs: number): number {
  return Math.max(1, Math.floor(timeoutMs / 2000));
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
export function connectInTurn(
  db: Knex,
  target: MysqlTarget,
  hosts: DatabaseHosts,
  galera: { timeoutMs: number; syncWait: number },
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
  { timeoutMs, syncWait }: { timeoutMs: number; syncWait: number },
  where: string,
): Promise<void> {
  const value = (sql: string) =>
    new Promise<string | undefined>((resolve, reject) =>
      connection.query({ sql, timeout: timeoutMs }, (error: Error | null, rows: Array<{ Value?: string }>) =>
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

/** The knex configuration of a MySQL pool on `target`'s hosts (DatabaseHosts). */
export function mysqlConfig(
  target: MysqlTarget,
  hosts: DatabaseHosts,
  timeoutMs: number,
  statementTimeoutMs: number,
  poolSize: number,
): Knex.Config {
  const [first] = target.hosts;
  return {
    client: "mysql2",
    // knex writes its warnings to stderr, outside the registry's log. The one it writes at every failed
    // connection attempt, with a stack, says nothing the registry's own error does not (the host, the code,
    // what to check): dropped; its other warnings still go to stderr.
    log: {
      warn(message: string) {
        if (!String(message).startsWith("Acquire connection error")) console.warn(message);
      },
    },
    connection: {
      host: first?.host,
      port: first?.port,
      user: target.user,
      password: target.password,
      ...(target.database === "" ? {} : { database: target.database }),
      // utf8mb4 so 4-byte characters (emoji) survive; the key columns carry their own binary collation.
      charset: "utf8mb4",
      connectTimeout: timeoutMs,
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
            `innodb_lock_wait_timeout = ${lockWaitTimeoutSeconds(statementTimeoutMs)}, time_zone = '+00:00'`,
          (error: Error | null) => {
            if (error !== null) return done(error, connection);
            // READ COMMITTED for the write transactions (sql-writer.ts says why), set here once
            // instead of by a statement before every BEGIN (run/writes.ts). It changes nothing for
            // the other statements, each a transaction of its own: either level reads a statement's
            // rows as committed when it started.
            connection.query(
              "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
              (isolationError: Error | null) => {
                if (isolationError === null) withStatementTimeout(connection, statementTimeoutMs, hosts);
                done(isolationError, connection);
              },
            );
          },
        );
      },
      // A connection to a host the pool has left (DatabaseHosts) is closed instead of used.
      validate: (connection: object) => hostOfConnection.get(connection) === hosts.current,
    },
    acquireConnectionTimeout: timeoutMs,
  };
}

type QueryCallback = (error: (Error & { code?: unknown }) | null, ...results: unknown[]) => void;

interface MysqlConnection {
  query(sql: string | Record<string, unknown>, ...rest: unknown[]): unknown;
  execute(sql: string, values: readonly unknown[], callback: QueryCallback): unknown;
  readonly stream: { destroy(): void };
}

/**
 * Gives every statement on `connection` mysql2's inactivity timeout, and marks the connection's host
 * failed (DatabaseHosts) when a statement fails as a failed node does (isNodeFailure). On a
 * timeout mysql2 fails the statement but keeps waiting for the server's answer
 * on the connection, so the ROLLBACK that follows would queue behind it and
 * hang as long: the socket is closed instead, which fails whatever is queued
 * at once, makes the server roll back the open transaction, and makes the
 * pool drop the connection. A prepared statement's execution (`execute`) is held to the same.
 */
function withStatementTimeout(connection: MysqlConnection, timeoutMs: number, hosts: DatabaseHosts): void {
  const failed = (error: (Error & { code?: unknown }) | null): void => {
    if (error?.code === "PROTOCOL_SEQUENCE_TIMEOUT") connection.stream.destroy();
    if (error !== null && isNodeFailure(error)) hosts.failed(hostOfConnection.get(connection) ?? -1);
  };
  const query = connection.query.bind(connection);
  connection.query = (sql, ...rest) => {
    const options = typeof sql === "string" ? { sql, timeout: timeoutMs } : { timeout: timeoutMs, ...sql };
    const callback = rest.at(-1);
    if (typeof callback === "function") {
      rest[rest.length - 1] = ((error, ...results) => {
        failed(error);
        (callback as QueryCallback)(error, ...results);
      }) satisfies QueryCallback;
    }
    return query(options, ...rest);
  };
  connection.execute = timedExecute(connection.execute.bind(connection), timeoutMs, failed);
}

/**
 * `execute` under a statement timeout: mysql2's own `timeout` starts only once the statement is prepared (its
 * PREPARE has none), so one timer covers both, and ends the statement as
 * mysql2's timeout ends a query (PROTOCOL_SEQUENCE_TIMEOUT, and `failed` closes the socket); what the driver
 * answers after it is dropped.
 */
function timedExecute(
  execute: MysqlConnection["execute"],
  timeoutMs: number,
  failed: (error: (Error & { code?: unknown }) | null) => void,
): MysqlConnection["execute"] {
  return (sql, values, callback) => {
    let answered = false;
    const answer: QueryCallback = (error, ...results) => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      failed(error);
      callback(error, ...results);
    };
    const timer = setTimeout(
      () => answer(Object.assign(new Error("Query inactivity timeout"), { code: "PROTOCOL_SEQUENCE_TIMEOUT" })),
      timeoutMs,
    );
    try {
      return execute(sql, values, answer);
    } catch (error) {
      // mysql2 refuses some values synchronously (undefined, a function): no statement was sent.
      answered = true;
      clearTimeout(timer);
      throw error;
    }
  };
}
