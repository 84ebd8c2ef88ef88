/**
 * How a list's statements (queries/search.ts) reach the database: the search
 * gate (search-gate.ts) in front of the costly ones, one time budget per
 * search, MySQL's server-side statement limit and `KILL QUERY` when the
 * client leaves, and SQLite's worker threads (sqlite-search-worker.ts) so a
 * costly statement never holds the event loop. The repository makes one
 * runner (sql-repository.ts) and every search goes through it.
 */
import type { Knex } from "knex";
import { refusal } from "../../domain/errors.js";
import type { ReadBinding } from "../queries/reads.js";
import type { SearchRow } from "../queries/search.js";
import type { Dialect } from "./connection.js";
import { defaultTimeoutMs, isMariaDb, serverVersion } from "./connection.js";
import type { MysqlConnection, SqliteConnection } from "./driver.js";
import { mysqlQuery, pooledConnections } from "./driver.js";
import { isStatementTimeout } from "./driver-errors.js";
import { Gate } from "./search-gate.js";
import { createSqliteSearchPool, defaultSqliteSearchWorkers, SearchStatementTimeout } from "./sqlite-search-worker.js";

/**
 * What one search statement runs for. The statements of one search share its
 * tenant, signal and deadline (sql-lists.ts search).
 */
export interface SearchCall {
  /**
   * The statement reads about a page of index entries whatever the data
   * (isBounded), so it skips the gate; the time limit applies to all.
   */
  readonly bounded?: boolean | undefined;
  /** The tenant searched: its line at the gate (at most `maxPerTenant` costly statements at once). */
  readonly tenant: string;
  /**
   * Aborts when nobody wants the answer any more (the client left, its gRPC
   * deadline passed): a statement waiting at the gate leaves the line, a
   * running MySQL statement is killed, and the call rejects with the signal's reason.
   */
  readonly signal?: AbortSignal | undefined;
  /**
   * The search's one time budget, a `Date.now()` time (searchDeadline): each
   * statement gets what is left of it, and the wait at the gate counts. Absent:
   * `timeoutMs` from now, for this statement alone.
   */
  readonly deadline?: number | undefined;
}

/** Runs one search statement; no statement cache (see the top of this file). */
export type RunSearch = (sql: string, bindings: readonly ReadBinding[], call: SearchCall) => Promise<SearchRow[]>;

/**
 * A RunSearch, how many of its statements wait at the gate (for the metrics),
 * and what it holds beyond knex's pool: SQLite's search workers, ended by close().
 */
export type SearchRunner = RunSearch & { readonly waiting: () => number; close(): Promise<void> };

/** What keeps searches from taking the pool from every other request (README, "Configuration"). */
export interface SearchLimits {
  /**
   * `SEARCH_MAX_CONCURRENT`, default 4: costly search statements (not
   * isBounded) on the database at once; more wait at the gate (search-gate.ts). Below the pool's size (10
   * on MySQL), so reads and writes always find a connection. On SQLite no
   * more than sqliteWorkers run at once either way.
   */
  readonly maxConcurrent?: number | undefined;
  /**
   * `SEARCH_MAX_PER_TENANT`, default 2: costly search statements of one
   * tenant at once; freed slots go round-robin between the tenants waiting.
   */
  readonly maxPerTenant?: number | undefined;
  /**
   * `SEARCH_TIMEOUT_MS`, default 10000, 0 for none: one search's time budget,
   * its wait at the gate and all its statements together (searchDeadline); the
   * server stops a statement when it runs out (MariaDB `max_statement_time`,
   * MySQL `MAX_EXECUTION_TIME`). On SQLite a statement's worker gets what is
   * left from its hand-over, and the statement is stopped at its next
   * candidate row when it runs out (search_alive, sqlite-search-worker.ts);
   * the bounded statements run on the main connection, unlimited: they read
   * about a page.
   */
  readonly timeoutMs?: number | undefined;
  /**
   * `SEARCH_SQLITE_WORKERS`, default one less than the cores (1 to 4): on SQLite, the worker threads (each
   * with its own read-only connection) that run the costly search statements.
   */
  readonly sqliteWorkers?: number | undefined;
  /**
   * StorageOptions.timeoutMs (`DATABASE_TIMEOUT_MS`, default 10000): the
   * pool's acquire timeout and the driver's wait for a statement's answer.
   * Also the longest a search waits for its turn here; past it the search
   * fails as unavailable, as it would waiting for a pooled connection.
   */
  readonly databaseTimeoutMs?: number | undefined;
}

export const defaultSearchMaxConcurrent = 4;

export const defaultSearchMaxPerTenant = 2;

export const defaultSearchTimeoutMs = 10_000;

/**
 * The deadline of a search that starts now (SearchCall.deadline): computed
 * once per search, so its statements share one budget (issue 25: a keyword
 * search's page and its count each took the whole limit, 13.2 s against the documented 10).
 */
export function searchDeadline(limits: Pick<SearchLimits, "timeoutMs">): number | undefined {
  const millis = limits.timeoutMs ?? defaultSearchTimeoutMs;
  return millis > 0 ? Date.now() + millis : undefined;
}

/**
 * How much longer than the server's limit the driver waits for a search's
 * answer: the server's timeout error must arrive first. Were the driver's wait
 * (connection.ts, the same length by default) to end first, it would close the
 * connection, answer a plain "unavailable" and leave the statement running.
 */
const driverGraceMs = 2_000;

/**
 * Runs search statements on `db`'s pool through the gate (search-gate.ts:
 * `maxConcurrent` at once, `maxPerTenant` per tenant) and each within what is
 * left of its search's time budget (SearchLimits). Searches cost what the
 * caller asks for (a keyword search on MariaDB costs per match: 0.4-0.6 s
 * for 10,000 matches of 1,000,000 definitions), so without the gate a few of them would
 * hold every pooled connection and stall the reads and writes of everyone.
 *
 * A search whose caller leaves (SearchCall.signal) stops: out of the gate's
 * line, or, running on MySQL, killed with `KILL QUERY` on its connection's
 * thread, sent from another pooled connection. On SQLite the costly ones run
 * on worker threads instead (SearchLimits.sqliteWorkers), which close() terminates.
 */
export function searchRunner(db: Knex, dialect: Dialect, limits: SearchLimits = {}): SearchRunner {
  const sqliteWorkers = limits.sqliteWorkers ?? defaultSqliteSearchWorkers;
  const maxConcurrent = limits.maxConcurrent ?? defaultSearchMaxConcurrent;
  // On SQLite the searches beyond the workers wait here, where the wait is bounded, not in the pool's line.
  const slots = dialect === "sqlite" ? Math.min(maxConcurrent, sqliteWorkers) : maxConcurrent;
  const budget: Budget = {
    gate: new Gate(slots, Math.min(slots, limits.maxPerTenant ?? defaultSearchMaxPerTenant)),
    waitMs: limits.databaseTimeoutMs ?? defaultTimeoutMs,
    timeoutMs: limits.timeoutMs ?? defaultSearchTimeoutMs,
    deadlineOf: (call) => call.deadline ?? searchDeadline(limits),
  };
  return dialect === "sqlite" ? sqliteRunner(db, budget, sqliteWorkers) : mysqlRunner(db, budget);
}

/** The gate and the time limits every statement of a runner runs within (SearchLimits). */
interface Budget {
  readonly gate: Gate;
  /** The longest a statement waits at the gate (the pool's acquire timeout, `databaseTimeoutMs`). */
  readonly waitMs: number;
  /** A search's whole budget (SEARCH_TIMEOUT_MS), named when it runs out. */
  readonly timeoutMs: number;
  /** The search's deadline: the call's own, or a budget that starts now. */
  readonly deadlineOf: (call: SearchCall) => number | undefined;
}

/**
 * Runs `run` once the call has its slot at the gate, and gives the slot back after; a bounded call skips the
 * gate. A call that left is answered with its signal's reason.
 */
async function gated<T>(
  { gate, waitMs }: Budget,
  call: SearchCall,
  deadline: number | undefined,
  run: () => Promise<T>,
): Promise<T> {
  if (call.signal?.aborted === true) throw call.signal.reason;
  if (call.bounded === true) return run();
  if (!gate.tryTake(call.tenant)) {
    // The wait counts against the budget, and is bounded by the pool's acquire timeout as a wait for a
    // connection would be.
    const waitFor = Math.min(waitMs, deadline === undefined ? waitMs : deadline - Date.now());
    await waitAtGate(gate, call.tenant, call.signal, waitFor).catch((error: unknown) => {
      if (call.signal?.aborted === true) throw call.signal.reason;
      throw refusal("The registry is busy with other searches; try again later.", error);
    });
  }
  try {
    return await run();
  } finally {
    gate.release(call.tenant);
  }
}

/**
 * SQLite's runner. A costly statement runs on a worker thread with its own read-only connection, answered at the
 * time limit (sqlite-search-worker.ts): on the main thread it would stop every request of the process until it
 * ended, and SQLite has no time limit of its own. A bounded one reads about a page of index entries (isBounded),
 * a fraction of a millisecond: it stays on the main connection, where it costs less than handing its page of
 * documents across threads. Each statement gets what is left of its search's budget, the wait at the gate
 * included.
 */
function sqliteRunner(db: Knex, budget: Budget, workers: number): SearchRunner {
  const withConnection = pooledConnections(db);
  const { timeoutMs } = budget;
  const pool = createSqliteSearchPool(sqliteFile(db), { workers, timeoutMs });
  const run: RunSearch = async (sql, bindings, call) => {
    if (call.signal?.aborted === true) throw call.signal.reason;
    if (call.bounded === true)
      return withConnection((connection) => (connection as SqliteConnection).prepare(sql).all(bindings) as SearchRow[]);
    const deadline = budget.deadlineOf(call);
    try {
      return await gated(budget, call, deadline, () => {
        // The budget went on the wait or on an earlier statement of the same search.
        const left = deadline === undefined ? undefined : deadline - Date.now();
        if (left !== undefined && left <= 0) throw outOfTime(timeoutMs, undefined);
        return pool.run(sql, bindings, call.signal, left ?? 0) as Promise<SearchRow[]>;
      });
    } catch (error) {
      throw error instanceof SearchStatementTimeout ? outOfTime(timeoutMs, error) : error;
    }
  };
  return Object.assign(run, { waiting: () => budget.gate.waiting, close: () => pool.close() });
}

/**
 * MySQL's runner: each statement on a pooled connection, limited on the server to what is left of its search's
 * budget, and killed when its caller leaves (killable).
 */
function mysqlRunner(db: Knex, budget: Budget): SearchRunner {
  const withConnection = pooledConnections(db);
  const { timeoutMs, waitMs } = budget;
  // KILL goes on a connection of its own, opened for it outside the pool: every pooled connection may be held
  // by a statement whose caller left, each waiting for its KILL before it gives its connection back (killable),
  // so a KILL that waited for a pooled connection would wait for itself (seen under the bench's load: a full pool
  // of abandoned list statements held every connection until the acquire timeout).
  const kill = (threadId: number) => killOnOwnConnection(db, threadId);
  let server: Promise<ServerKind> | undefined;
  const run: RunSearch = async (sql, bindings, call) => {
    const deadline = budget.deadlineOf(call);
    // Once per pool; a failed look is tried again by the next search.
    const kind =
      deadline === undefined
        ? undefined
        : await (server ??= serverKind(db).catch((error: unknown) => {
            server = undefined;
            throw error;
          }));
    try {
      return await gated(budget, call, deadline, () =>
        withConnection((connection) => {
          const left = deadline === undefined ? undefined : deadline - Date.now();
          // The budget went on the wait or on an earlier statement of the same search.
          if (left !== undefined && left <= 0) throw outOfTime(timeoutMs, undefined);
          const limited = kind === undefined || left === undefined ? sql : withTimeLimit(kind, sql, left);
          const driverMs = left === undefined ? waitMs : Math.max(waitMs, left + driverGraceMs);
          return killable(
            connection as MysqlConnection,
            call.signal,
            kill,
            () =>
              mysqlQuery(connection as MysqlConnection, { sql: limited, timeout: driverMs }, bindings) as Promise<
                SearchRow[]
              >,
          );
        }),
      );
    } catch (error) {
      if (!isStatementTimeout(error)) throw error;
      throw outOfTime(timeoutMs, error);
    }
  };
  return Object.assign(run, { waiting: () => budget.gate.waiting, close: async () => undefined });
}

/** The file of a knex SQLite instance (connection.ts sqliteConfig). */
function sqliteFile(db: Knex): string {
  const { filename } = (db.client as { config: { connection: { filename: string } } }).config.connection;
  return filename;
}

/** The search ran out of its time budget (SEARCH_TIMEOUT_MS). */
function outOfTime(timeoutMs: number, cause: unknown): Error {
  const seconds = timeoutMs / 1000;
  return refusal(
    `The search took longer than the limit of ${seconds} ${seconds === 1 ? "second" : "seconds"} and was stopped; ` +
      "narrow it with filters (e.g. provider, tag, name) or fewer keywords.",
    cause,
  );
}

/** Waits in `tenant`'s line at most `millis`, or until `signal` aborts (then rejects with its reason). */
async function waitAtGate(gate: Gate, tenant: string, signal: AbortSignal | undefined, millis: number): Promise<void> {
  const leave = new AbortController();
  const timer = setTimeout(() => leave.abort(new Error(`No search slot within ${millis} ms.`)), Math.max(0, millis));
  const onAbort = () => leave.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    await gate.take(tenant, leave.signal);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

/**
 * Runs `query` on `connection`, killing it (`KILL QUERY` on the connection's
 * server thread, sent on another connection) when `signal` aborts first; then
 * rejects with the signal's reason. The connection goes back to the pool only
 * once the KILL has been answered: a KILL arriving after its next holder began
 * a statement would stop that one. A KILL that finds the thread idle (the
 * statement had just ended) leaves it as it was: MariaDB and MySQL clear it
 * before the thread's next statement.
 */
async function killable<T>(
  connection: MysqlConnection,
  signal: AbortSignal | undefined,
  kill: (threadId: number) => Promise<unknown>,
  query: () => Promise<T>,
): Promise<T> {
  if (signal === undefined) return query();
  if (signal.aborted) throw signal.reason;
  const threadId = connection.threadId;
  let killing: Promise<unknown> | undefined;
  // A failed KILL (no connection to send it on) leaves the statement to its time limit.
  const onAbort = () => {
    if (threadId !== null) killing = kill(threadId).catch(() => undefined);
  };
  signal.addEventListener("abort", onAbort, { once: true });
  try {
    return await query();
  } catch (error) {
    throw signal.aborted ? signal.reason : error;
  } finally {
    signal.removeEventListener("abort", onAbort);
    await killing;
  }
}

/** `KILL QUERY <threadId>` on a connection opened for it (knex's raw connection, outside the pool), then closed. */
async function killOnOwnConnection(db: Knex, threadId: number): Promise<void> {
  const client = db.client as {
    acquireRawConnection(): Promise<MysqlConnection>;
    destroyRawConnection(connection: MysqlConnection): Promise<void>;
  };
  const connection = await client.acquireRawConnection();
  try {
    await mysqlQuery(connection, `KILL QUERY ${threadId}`, []);
  } finally {
    await client.destroyRawConnection(connection).catch(() => undefined);
  }
}

/** Which server a MySQL-dialect pool talks to: they spell a statement's time limit differently. */
type ServerKind = "mariadb" | "mysql";

async function serverKind(db: Knex): Promise<ServerKind> {
  return isMariaDb(await serverVersion(db)) ? "mariadb" : "mysql";
}

/**
 * `sql` (one SELECT) limited to `millis` on the server: MariaDB's
 * `SET STATEMENT max_statement_time` (seconds; ER_STATEMENT_TIMEOUT, 1969),
 * MySQL's optimizer hint `MAX_EXECUTION_TIME` (milliseconds; ER_QUERY_TIMEOUT, 3024).
 */
function withTimeLimit(kind: ServerKind, sql: string, millis: number): string {
  if (!sql.startsWith("SELECT "))
    throw new Error(`A search statement must be a SELECT to be time-limited: ${sql.slice(0, 40)}`);
  if (kind === "mariadb") return `SET STATEMENT max_statement_time = ${millis / 1000} FOR ${sql}`;
  return `SELECT /*+ MAX_EXECUTION_TIME(${millis}) */ ${sql.slice("SELECT ".length)}`;
}
