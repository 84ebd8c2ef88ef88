/**
 * The drivers under knex, as the hot paths use them: a connection borrowed
 * from knex's own pool (the same connections, limits, session settings and
 * statement timeout as every other query; connection.ts), and the part of
 * each driver's API the runners call. run/reads.ts runs the hot reads this
 * way, run/writes.ts the write transaction.
 */
import type { Knex } from "knex";

/** The part of a mysql2 connection the runners use. */
export interface MysqlConnection {
  /** A statement, or one with its own `timeout` (connection.ts lets it replace the pool's statement timeout). */
  query(
    sql: string | { sql: string; timeout: number },
    bindings: readonly unknown[],
    callback: (error: Error | null, result: unknown) => void,
  ): unknown;
  /**
   * A statement as a prepared statement's execution (the binary protocol: each value goes as length-prefixed
   * bytes, no escaping, no hex), prepared first unless mysql2 holds it prepared on this connection; under the
   * same statement timeout as `query` (mysql-pool.ts).
   */
  execute(sql: string, bindings: readonly unknown[], callback: (error: Error | null, result: unknown) => void): unknown;
  /** Closes the statement `execute` left prepared for `sql` on this connection (COM_STMT_CLOSE), if any. */
  unprepare(sql: string): unknown;
  /** The connection's socket: destroyed once the connection is lost or closed. */
  readonly stream: { readonly destroyed: boolean };
  /** Closes the socket at once; the pool then drops the connection. */
  destroy(): void;
  /**
   * The server's id of the connection's thread (`CONNECTION_ID()`), what `KILL QUERY` names; null before the
   * handshake.
   */
  readonly threadId: number | null;
}

/** A better-sqlite3 statement. */
export interface SqliteStatement {
  all(bindings: readonly unknown[]): unknown[];
  run(bindings: readonly unknown[]): { changes: number; lastInsertRowid: number | bigint };
}

/** The part of a better-sqlite3 connection the runners use. */
export interface SqliteConnection {
  prepare(sql: string): SqliteStatement;
  /**
   * True between BEGIN and the end of the transaction, however it ended (SQLite rolls back by itself on some
   * errors).
   */
  readonly inTransaction: boolean;
}

/** Runs `use` on a connection from knex's pool and gives it back, however `use` ends. */
export type WithConnection = <T>(use: (connection: unknown) => Promise<T> | T) => Promise<T>;

/** Borrows connections from `db`'s pool. */
export function pooledConnections(db: Knex): WithConnection {
  const client = db.client as {
    acquireConnection(): Promise<unknown>;
    releaseConnection(connection: unknown): Promise<unknown>;
  };
  return async (use) => {
    // knex's pool: a connection it finds broken (mysql2 marks fatal errors) is replaced on acquire.
    const connection = await client.acquireConnection();
    try {
      return await use(connection);
    } finally {
      await client.releaseConnection(connection);
    }
  };
}

/** Runs one statement on a mysql2 connection and answers what the driver does: rows, or the OK packet. */
export function mysqlQuery(
  connection: MysqlConnection,
  sql: string | { sql: string; timeout: number },
  bindings: readonly unknown[],
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    connection.query(sql, bindings, (error, result) => (error === null ? resolve(result) : reject(error)));
  });
}

/**
 * Runs one statement on a mysql2 connection as a prepared statement: PREPARE, EXECUTE, and the statement closed
 * again (mysql2 would keep it for the connection's next use of the same text); answers as mysqlQuery does.
 * Never kept: kept across a break of agent_definitions' triggers (run/broken-triggers.ts), a statement failed
 * even after they were reloaded ("Table '...definition_counts' doesn't exist", MariaDB 10.11,
 * test/storage/broken-triggers.test.ts with every write's statements prepared), and one PREPARE more is nothing
 * beside the large values this is for (run/writes.ts).
 */
export function mysqlExecute(connection: MysqlConnection, sql: string, bindings: readonly unknown[]): Promise<unknown> {
  return new Promise((resolve, reject) => {
    connection.execute(sql, bindings, (error, result) => {
      // A lost or timed-out connection (its socket closed, mysql-pool.ts) has nothing left to close.
      if (!connection.stream.destroyed) connection.unprepare(sql);
      return error === null ? resolve(result) : reject(error);
    });
  });
}

/**
 * Prepares each statement once per SQLite connection instead of on every
 * query. Statements belong to their connection; a connection the pool
 * replaced takes its statements along.
 */
export function sqliteStatements(): (connection: SqliteConnection, sql: string) => SqliteStatement {
  const prepared = new WeakMap<object, Map<string, SqliteStatement>>();
  return (connection, sql) => {
    let own = prepared.get(connection);
    if (own === undefined) prepared.set(connection, (own = new Map()));
    let statement = own.get(sql);
    if (statement === undefined) own.set(sql, (statement = connection.prepare(sql)));
    return statement;
  };
}
