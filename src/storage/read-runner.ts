/**
 * How the hot reads (queries.ts) reach the database: their SQL is built once,
 * so all a read needs is a pooled connection and the driver.
 */
import type { Knex } from "knex";
import type { Dialect } from "./connection.js";
import type { ReadBinding, RunRead } from "./queries.js";
import type { DefinitionReadRow } from "./rows.js";

/** The part of a mysql2 connection a read uses. */
interface MysqlConnection {
  query(sql: string, bindings: readonly ReadBinding[], callback: (error: Error | null, rows: unknown) => void): unknown;
}

/** The part of a better-sqlite3 connection (and statement) a read uses. */
interface SqliteConnection {
  prepare(sql: string): { all(bindings: readonly ReadBinding[]): unknown[] };
}

/**
 * Runs reads on a connection from knex's own pool, straight through the
 * driver: the same connections, limits, session settings and statement
 * timeout (connection.ts wraps the connection's `query`) as every other
 * query, without knex's per-query work (its runner, events and response
 * processing), and on SQLite each statement prepared once per connection
 * instead of on every query. Measured on MariaDB (100,000 definitions, 20,000
 * gets by id, 10 at a time, three runs): through `knex.raw(sql, bindings)`
 * 12,700-14,600 gets per second at 60-70 µs of client CPU each; this way
 * 13,700-20,400 at 42-55 µs, as fast as a bare mysql2 pool (12,900-16,200 at
 * 39-53 µs). On SQLite: 17,000-20,000 against 31,000-47,000.
 */
export function driverRunner(db: Knex, dialect: Dialect): RunRead {
  const client = db.client as { acquireConnection(): Promise<unknown>; releaseConnection(connection: unknown): Promise<unknown> };
  const withConnection = async <T>(use: (connection: unknown) => Promise<T> | T): Promise<T> => {
    // knex's pool: a connection it finds broken (mysql2 marks fatal errors) is replaced on acquire.
    const connection = await client.acquireConnection();
    try {
      return await use(connection);
    } finally {
      await client.releaseConnection(connection);
    }
  };
  if (dialect === "mysql") {
    return (sql, bindings) =>
      withConnection(
        (connection) =>
          new Promise<DefinitionReadRow[]>((resolve, reject) => {
            (connection as MysqlConnection).query(sql, bindings, (error, rows) => (error === null ? resolve(rows as DefinitionReadRow[]) : reject(error)));
          }),
      );
  }
  // Statements belong to their connection; a connection the pool replaced takes its statements along.
  const prepared = new WeakMap<object, Map<string, ReturnType<SqliteConnection["prepare"]>>>();
  return (sql, bindings) =>
    withConnection((connection) => {
      let own = prepared.get(connection as object);
      if (own === undefined) prepared.set(connection as object, (own = new Map()));
      let statement = own.get(sql);
      if (statement === undefined) own.set(sql, (statement = (connection as SqliteConnection).prepare(sql)));
      return statement.all(bindings) as DefinitionReadRow[];
    });
}
