/**
 * How the write transaction (queries/writes.ts) reaches the
 * database: BEGIN, its statements and COMMIT or ROLLBACK, sent by us on one
 * connection from knex's pool, straight through the driver, as the hot reads
 * are (run/reads.ts).
 *
 * Why not knex's transaction: new agents are numbered one at a time (the
 * tenant's sequence row is locked from the moment a creator knows it needs a
 * number until it commits), so what a transaction spends between its
 * statements bounds how many agents a tenant can create per second. Through
 * knex each statement cost a query build and compile, its runner and events
 * (about 40 % of the server's busy CPU in a profile of POSTs creating agents),
 * and each transaction two more round trips (SET TRANSACTION ISOLATION LEVEL,
 * BEGIN). The isolation level is now the session's (connection.ts), set once
 * per connection.
 */
import type { Knex } from "knex";
import type { Dialect } from "./connection.js";
import type { MysqlConnection, SqliteConnection } from "./driver.js";
import { mysqlQuery, pooledConnections, sqliteStatements } from "./driver.js";

/** What a write statement binds: names, ids, numbers, timestamps as text, documents, and the binary encoding. */
export type WriteBinding = string | number | Buffer | null;

/** What an INSERT or UPDATE did. */
export interface Changed {
  /** Rows matched (MySQL: mysql2 connects with FOUND_ROWS) or changed (SQLite). */
  readonly affectedRows: number;
  /**
   * MySQL's insert id: the AUTO_INCREMENT value an INSERT took, or the value of `LAST_INSERT_ID(expr)` an
   * UPDATE set.
   */
  readonly insertId: number;
}

/** One transaction's statements, on its one connection. */
export interface WriteSession {
  /** The rows a statement answers (a SELECT, or SQLite's `... RETURNING`). */
  rows<T>(sql: string, bindings: readonly WriteBinding[]): Promise<T[]>;
  /** Runs an INSERT or UPDATE. */
  change(sql: string, bindings: readonly WriteBinding[]): Promise<Changed>;
}

/**
 * Runs `work` in a transaction on one pooled connection: commits when it
 * resolves; rolls back and rethrows its error when it throws. A failed
 * COMMIT rejects with the driver's error, after a ROLLBACK.
 */
export type RunTransaction = <T>(work: (session: WriteSession) => Promise<T>) => Promise<T>;

/** The transaction runner for `db`'s driver. */
export function transactionRunner(db: Knex, dialect: Dialect): RunTransaction {
  const withConnection = pooledConnections(db);
  return dialect === "mysql" ? mysqlTransactions(withConnection) : sqliteTransactions(withConnection);
}

function mysqlTransactions(withConnection: ReturnType<typeof pooledConnections>): RunTransaction {
  return (work) =>
    withConnection(async (pooled) => {
      const connection = pooled as MysqlConnection;
      const session: WriteSession = {
        rows: async <T>(sql: string, bindings: readonly WriteBinding[]) =>
          (await mysqlQuery(connection, sql, bindings)) as T[],
        change: async (sql, bindings) => {
          const { affectedRows, insertId } = (await mysqlQuery(connection, sql, bindings)) as Changed;
          return { affectedRows, insertId };
        },
      };
      await mysqlQuery(connection, "BEGIN", []);
      try {
        const result = await work(session);
        await mysqlQuery(connection, "COMMIT", []);
        return result;
      } catch (error) {
        await mysqlQuery(connection, "ROLLBACK", []).catch(() => {
          // A connection that could not roll back must not go back to the pool with a transaction open:
          // closing it makes the server roll back, and the pool replaces it on the next acquire.
          connection.destroy();
        });
        throw error;
      }
    });
}

function sqliteTransactions(withConnection: ReturnType<typeof pooledConnections>): RunTransaction {
  const statement = sqliteStatements();
  return (work) =>
    withConnection(async (pooled) => {
      const connection = pooled as SqliteConnection;
      const run = (sql: string) => statement(connection, sql).run([]);
      // Deferred, as knex began it: the write lock is taken by the first write, and a snapshot
      // another process has written past since fails it with SQLITE_BUSY, which is retried.
      const session: WriteSession = {
        rows: async <T>(sql: string, bindings: readonly WriteBinding[]) =>
          statement(connection, sql).all(bindings) as T[],
        change: async (sql, bindings) => {
          const { changes, lastInsertRowid } = statement(connection, sql).run(bindings);
          return { affectedRows: changes, insertId: Number(lastInsertRowid) };
        },
      };
      run("BEGIN");
      try {
        const result = await work(session);
        run("COMMIT");
        return result;
      } catch (error) {
        // SQLite ends a transaction by itself on some errors; a COMMIT that failed (SQLITE_BUSY) leaves it open.
        if (connection.inTransaction) {
          try {
            run("ROLLBACK");
          } catch {
            // The error that ended the work is the one to report.
          }
        }
        throw error;
      }
    });
}
