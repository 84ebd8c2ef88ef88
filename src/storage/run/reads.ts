/**
 * How the hot reads (queries/reads.ts) reach the database: their SQL is built once,
 * so all a read needs is a pooled connection and the driver.
 */
import type { Knex } from "knex";
import { type KeyedRead, type RunRead, rowsOfKey } from "../queries/reads.js";
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

/** The most keys one coalesced statement binds; a larger batch is read in several statements. */
export const MAX_KEYS_PER_READ = 64;

/** Reads of one KeyedRead, each answering what the read's one-key statement answers for its key. */
export interface KeyedReads {
  read(tenant: string, key: string): Promise<DefinitionReadRow[]>;
  /** How many reads were asked and how many statements answered them (for tests). */
  stats(): { reads: number; statements: number };
}

interface Waiting {
  readonly key: string;
  resolve(rows: DefinitionReadRow[]): void;
  reject(error: unknown): void;
}

/** A string mysql2 would not send as it is: a lone surrogate goes out as U+FFFD. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/**
 * Hot reads by key coalesced (MySQL): the reads by id (a GET by id) or by reference id (a GET by
 * `Agent_ID=`) asked while one of the same is in flight are sent at the end of the event loop's turn
 * (setImmediate: every request whose bytes that poll of the sockets delivered has asked by then), one
 * statement per tenant (`read.many`: `IN (...)`, at most `maxKeys` keys) instead of one each, and each
 * caller gets what its own statement would have answered (rowsOfKey). A read asked while none is in flight
 * is sent at once, alone (`read.one`, as before): the coalescing only gathers what would otherwise have
 * queued behind the database, and a lone GET pays nothing for it. Each statement is a round trip, a socket
 * write and a wake-up of a MariaDB thread: on this project's 2-core machines the GETs by id ran at
 * 0.42-0.53x of the bench's floor one statement each and 0.70-0.89x coalesced, MariaDB's CPU 36-43 % against
 * 26-32 % (BENCHMARKS.md, "Reads by id coalesced"). Every read of a statement shares its outcome: a failure
 * fails them all, each mapped by the repository as its own would have been. A key with a lone surrogate is
 * read alone: the driver sends it changed, so a row's key could not be matched to it.
 */
export function coalescedReads(run: RunRead, read: KeyedRead, maxKeys = MAX_KEYS_PER_READ): KeyedReads {
  let pending: Map<string, Waiting[]> | undefined;
  let reads = 0;
  let sent = 0;
  /** Statements sent and not yet answered. */
  let inFlight = 0;
  const send = (tenant: string, waiting: readonly Waiting[]): void => {
    sent++;
    inFlight++;
    // A read alone (the usual case when the database keeps up) makes no set of its keys.
    const keys = waiting.length === 1 ? waiting.map((w) => w.key) : [...new Set(waiting.map((w) => w.key))];
    const answer = run(keys.length === 1 ? read.one : read.many(keys.length), [...keys, tenant]);
    answer.then(
      (rows) => {
        inFlight--;
        for (const w of waiting) w.resolve(keys.length === 1 ? rows : rowsOfKey(read, rows, w.key));
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
      for (let i = 0; i < waiting.length; i += maxKeys) send(tenant, waiting.slice(i, i + maxKeys));
    }
  };
  return {
    read(tenant, key) {
      reads++;
      return new Promise((resolve, reject) => {
        if ((inFlight === 0 && pending === undefined) || LONE_SURROGATE.test(key))
          return send(tenant, [{ key, resolve, reject }]);
        if (pending === undefined) {
          pending = new Map();
          setImmediate(flush);
        }
        const waiting = pending.get(tenant);
        if (waiting === undefined) pending.set(tenant, [{ key, resolve, reject }]);
        else waiting.push({ key, resolve, reject });
      });
    },
    stats: () => ({ reads, statements: sent }),
  };
}

/**
 * The two reads by key (by id: a GET by id; by reference id: a GET by `Agent_ID=`): coalesced on MySQL
 * (coalescedReads); on SQLite, in-process with no round trip to save, each its own statement, counted all the
 * same so the metrics read alike on both databases.
 */
export function keyedReads(
  run: RunRead,
  dialect: Dialect,
  statements: { readonly byId: KeyedRead; readonly newestByReference: KeyedRead },
): { byId: KeyedReads; byReference: KeyedReads } {
  const each = dialect === "mysql" ? coalescedReads : oneByOne;
  return { byId: each(run, statements.byId), byReference: each(run, statements.newestByReference) };
}

/** Each read its own statement (`read.one`). */
function oneByOne(run: RunRead, read: KeyedRead): KeyedReads {
  let reads = 0;
  return {
    read(tenant, key) {
      reads++;
      return run(read.one, [key, tenant]);
    },
    stats: () => ({ reads, statements: reads }),
  };
}
