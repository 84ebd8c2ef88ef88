/**
 * How the hot reads (queries/reads.ts) reach the database: their SQL is built once,
 * so all a read needs is a pooled connection and the driver.
 */
import type { Knex } from "knex";
import type { RunRead } from "../queries/reads.js";
import type { DefinitionReadRow } from "../rows.js";
import type { Dialect } from "./connection.js";
import type { MysqlConnection, SqliteConnection } from "./driver.js";
import { mysqlQuery, pooledConnections, sqliteStatements } from "./driver.js";

/**
 * Runs reads on a connection from knex's own pool, straight through the
 * driver (driver.ts): the same connections, limits, session settings and
 * statement timeout (connection.ts wraps the connection's `query`) as every
 * other query, without knex's per-query work (its runner, events and response
 * processing), and on SQLite each statement prepared once per connection
 * instead of on every query. Measured on MariaDB (100,000 definitions, 20,000
 * gets by id, 10 at a time, three runs): through `knex.raw(sql, bindings)`
 * 12,700-14,600 gets per second at 60-70 µs of client CPU each; this way
 * 13,700-20,400 at 42-55 µs, as fast as a bare mysql2 pool (12,900-16,200 at
 * 39-53 µs). On SQLite: 17,000-20,000 against 31,000-47,000.
 */
export function driverRunner(db: Knex, dialect: Dialect): RunRead {
  const withConnection = pooledConnections(db);
  if (dialect === "mysql") {
    return (sql, bindings) =>
      withConnection(
        async (connection) => (await mysqlQuery(connection as MysqlConnection, sql, bindings)) as DefinitionReadRow[],
      );
  }
  const statement = sqliteStatements();
  return (sql, bindings) =>
    withConnection((connection) => statement(connection as SqliteConnection, sql).all(bindings) as DefinitionReadRow[]);
}
