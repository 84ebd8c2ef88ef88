/**
 * How the hot reads (queries/reads.ts) reach the database: their SQL is built once,
 * so all a read needs is a pooled connection and the driver.
 */
import type { Knex } from "knex";
import { type ReadStatements, type RunRead, rowsById } from "../queries/reads.js";
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

/** The most ids one coalesced read binds; a larger batch is read in several statements. */
export const MAX_IDS_PER_READ = 64;

/** Reads by id, each answering what queries/reads.ts's readById answers for it. */
export interface ReadsById {
  read(tenant: string, id: string): Promise<DefinitionReadRow[]>;
  /** How many reads were asked and how many statements answered them (for tests). */
  stats(): { reads: number; statements: number };
}

interface Waiting {
  readonly id: string;
  resolve(rows: DefinitionReadRow[]): void;
  reject(error: unknown): void;
}

/**
 * Reads by id coalesced (MySQL): the reads asked in one turn of the event loop (the GETs whose requests one
 * poll of the sockets delivered, whichever door they came through) are sent at the turn's end
 * (setImmediate), one statement per tenant (`byIds`: `d.id IN (...)`, at most `maxIds` ids) instead of one
 * each, and each caller gets what its own statement would have answered (rowsById). A read asked while no
 * statement of these is in flight is sent at once, alone (the one-id statement, as before): the coalescing
 * only gathers what would otherwise have queued behind the database. Each statement is a round trip, a socket write and a wake-up of a
 * MariaDB thread: on this project's 2-core machines the GETs by id ran at 0.47-0.57x of the bench's floor
 * one statement each and 0.81-0.86x coalesced, MariaDB's CPU 40-44 % against 26 % (BENCHMARKS.md, "Reads
 * by id coalesced"). Every read of a statement shares its outcome: a failure fails them all, each mapped
 * as its own would have been.
 */
export function coalescedReadsById(
  run: RunRead,
  statements: Pick<ReadStatements, "byId" | "byIds">,
  maxIds = MAX_IDS_PER_READ,
): ReadsById {
  let pending: Map<string, Waiting[]> | undefined;
  let reads = 0;
  let sent = 0;
  /** Statements sent and not yet answered. */
  let inFlight = 0;
  const send = (tenant: string, waiting: readonly Waiting[]): void => {
    sent++;
    inFlight++;
    const ids = [...new Set(waiting.map((w) => w.id))];
    const [only] = ids;
    const answer =
      ids.length === 1 && only !== undefined
        ? run(statements.byId, [only, tenant])
        : run(statements.byIds(ids.length), [...ids, tenant]);
    answer.then(
      (rows) => {
        inFlight--;
        for (const w of waiting) w.resolve(ids.length === 1 ? rows : rowsById(rows, w.id));
      },
      (error: unknown) => {
        inFlight--;
        for (const w of waiting) w.reject(error);
      },
    );
  };
  const flush = (): void => {
    const batches = pending;
    pending = undefined;
    for (const [tenant, waiting] of batches ?? []) {
      for (let i = 0; i < waiting.length; i += maxIds) send(tenant, waiting.slice(i, i + maxIds));
    }
  };
  return {
    read(tenant, id) {
      reads++;
      return new Promise((resolve, reject) => {
        // Nothing to wait behind: sent at once, so that a read alone pays nothing for the coalescing.
        if (inFlight === 0 && pending === undefined) return send(tenant, [{ id, resolve, reject }]);
        if (pending === undefined) {
          pending = new Map();
          setImmediate(flush);
        }
        const waiting = pending.get(tenant);
        if (waiting === undefined) pending.set(tenant, [{ id, resolve, reject }]);
        else waiting.push({ id, resolve, reject });
      });
    },
    stats: () => ({ reads, statements: sent }),
  };
}
