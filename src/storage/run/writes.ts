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
import { mysqlExecute, mysqlQuery, pooledConnections, sqliteStatements } from "./driver.js";

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

/** One statement and its bindings. */
export interface BoundStatement {
  readonly sql: string;
  readonly bindings: readonly WriteBinding[];
}

/**
 * The last statements of a transaction: `before`, what the transaction left
 * to write last; `take`, which takes the tenant's revisions and answers the
 * last one as a row `{revision}`; and `after`, the statements that use it;
 * then COMMIT, unless `take` commits itself (`commits`: MySQL's CALL, which
 * also writes what `after` would). From `take` to the end of COMMIT the
 * tenant's revision row is locked, and every other writer of the tenant waits.
 */
export interface CommitWith {
  readonly before: readonly BoundStatement[];
  readonly take: BoundStatement;
  readonly after: (last: number) => readonly BoundStatement[];
  readonly commits: boolean;
}

/** One transaction's statements, on its one connection. */
export interface WriteSession {
  /** The rows a statement answers (a SELECT, or SQLite's `... RETURNING`). */
  rows<T>(sql: string, bindings: readonly WriteBinding[]): Promise<T[]>;
  /** Runs an INSERT or UPDATE. */
  change(sql: string, bindings: readonly WriteBinding[]): Promise<Changed>;
  /**
   * Runs `last`'s statements and COMMIT, and answers the last revision taken: one statement per round trip,
   * never a multi-statement query (a Galera brute-force abort inside one lost acknowledged writes). From
   * `take` to the end of COMMIT the tenant's revision row is locked: every writer of the tenant queues on it.
   * A statement that fails stops the rest, COMMIT included, and the transaction is rolled back. `committing`
   * is called right before COMMIT (or the `take` that commits) is sent: from then on a lost connection leaves
   * the outcome unknown.
   */
  commitWith(last: CommitWith, committing: () => void): Promise<number>;
}

/**
 * Runs `work` in a transaction on one pooled connection: commits when it
 * resolves; rolls back and rethrows its error when it throws. A failed
 * COMMIT rejects with the driver's error, after a ROLLBACK.
 */
export type RunTransaction = <T>(work: (session: WriteSession) => Promise<T>) => Promise<T>;

/**
 * The transaction runner for `db`'s driver. SQLite: `beforeWrite` is awaited on the connection, before BEGIN
 * (the WAL checkpointer's, sqlite-checkpointer.ts).
 */
export function transactionRunner(db: Knex, dialect: Dialect, beforeWrite?: () => Promise<void>): RunTransaction {
  const withConnection = pooledConnections(db);
  return dialect === "mysql" ? mysqlTransactions(withConnection) : sqliteTransactions(withConnection, beforeWrite);
}

/**
 * MySQL: a value from which a statement goes as a prepared statement (`execute`, the binary protocol) rather than
 * as text. Through `query` mysql2 escapes every string into the statement's text and writes a Buffer as hex, on
 * the event loop: the CALL that commits a ~1 MB definition (its document and binary encoding, queries/revisions.ts)
 * held it 18-70 ms (issue 50). As a prepared statement's parameters the values go as length-prefixed bytes, for
 * a PREPARE's round trip more (and its COM_STMT_CLOSE), which the small writes, most of them, are spared.
 */
export const PREPARED_FROM_BYTES = 16 * 1024;

/** Whether a binding is large enough for its statement to go prepared (PREPARED_FROM_BYTES; characters for text). */
const isLarge = (binding: WriteBinding): boolean =>
  (typeof binding === "string" || Buffer.isBuffer(binding)) && binding.length >= PREPARED_FROM_BYTES;

/** One MySQL statement on `connection`: prepared when it binds a large value (PREPARED_FROM_BYTES), else as text. */
function mysqlStatement(connection: MysqlConnection, sql: string, bindings: readonly WriteBinding[]): Promise<unknown> {
  return bindings.some(isLarge) ? mysqlExecute(connection, sql, bindings) : mysqlQuery(connection, sql, bindings);
}

/** Runs one statement by itself (autocommitted) and answers what the driver does. */
export type RunStatement = (sql: string, bindings: readonly WriteBinding[]) => Promise<unknown>;

/**
 * MySQL: runs statements by themselves on connections of `db`'s pool, each prepared when it binds a large value
 * as the write transaction's are (search-text.ts's texts, written after COMMIT, are as large as the documents).
 */
export function mysqlStatements(db: Knex): RunStatement {
  const withConnection = pooledConnections(db);
  return (sql, bindings) => withConnection((pooled) => mysqlStatement(pooled as MysqlConnection, sql, bindings));
}

function mysqlTransactions(withConnection: ReturnType<typeof pooledConnections>): RunTransaction {
  return (work) =>
    withConnection(async (pooled) => {
      const connection = pooled as MysqlConnection;
      const run = (sql: string, bindings: readonly WriteBinding[]) => mysqlStatement(connection, sql, bindings);
      let committed = false;
      const session: WriteSession = {
        rows: async <T>(sql: string, bindings: readonly WriteBinding[]) => (await run(sql, bindings)) as T[],
        change: async (sql, bindings) => {
          const { affectedRows, insertId } = (await run(sql, bindings)) as Changed;
          return { affectedRows, insertId };
        },
        commitWith: async ({ before, take, after, commits }, committing) => {
          // Never a multi-statement query: on a Galera node a transaction aborted by another node's write (a
          // brute-force abort) in the middle of one lost an acknowledged write (test/cluster/revisions.test.ts,
          // 3 runs in 18; docs/decisions.md). A CALL is one statement: it fails whole.
          for (const statement of before) await run(statement.sql, statement.bindings);
          if (commits) committing();
          // A CALL answers its result sets and then an OK packet.
          const answered = (await run(take.sql, take.bindings)) as unknown[];
          if (commits) committed = true;
          const revision = lastRevisionOf(Array.isArray(answered[0]) ? answered[0] : answered);
          for (const statement of after(revision)) await run(statement.sql, statement.bindings);
          if (!committed) {
            committing();
            await mysqlQuery(connection, "COMMIT", []);
            committed = true;
          }
          return revision;
        },
      };
      await mysqlQuery(connection, "BEGIN", []);
      try {
        const result = await work(session);
        if (!committed) await mysqlQuery(connection, "COMMIT", []);
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

/**
 * SQLite: the longest a transaction's statements run on the event loop
 * before it gives the loop back (issue 50). better-sqlite3 and `node:sqlite`
 * run each statement synchronously, so a write of thousands of term rows
 * held the whole process (1.1-1.4 s for ~76,000 rows): between statements,
 * once this much time has passed since it last did, the transaction waits
 * for the loop's next turn. The loop then serves other requests; none of them
 * can reach the uncommitted state, since the pool's one connection
 * (connection.ts) stays this transaction's until it ends, and the search
 * workers' read-only connections see committed data only.
 */
export const SQLITE_SLICE_MS = 10;

/**
 * Resolves on the event loop's next turn, after the timers and I/O it has waiting. From a continuation of
 * setImmediate (a transaction's later slices) setImmediate would do; a request's work runs in the loop's poll
 * phase, where an immediate runs before the loop comes round to its timers again.
 */
const nextTurn = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

function sqliteTransactions(
  withConnection: ReturnType<typeof pooledConnections>,
  beforeWrite: (() => Promise<void>) | undefined,
): RunTransaction {
  const statement = sqliteStatements();
  return (work) =>
    withConnection(async (pooled) => {
      const connection = pooled as SqliteConnection;
      // Holding the one connection: no other write commits between a checkpoint waited for here and this
      // transaction's first write, which then starts the WAL over (sqlite-checkpointer.ts).
      await beforeWrite?.();
      const run = (sql: string) => statement(connection, sql).run([]);
      let committed = false;
      // From BEGIN: what the request did before (parsing and checking a large body) had its own turns
      // (service/write-admission.ts).
      let sliceStart = performance.now();
      /** Gives the event loop back once this slice has run `millis`. */
      const slice = async (millis = SQLITE_SLICE_MS): Promise<void> => {
        if (performance.now() - sliceStart < millis) return;
        await nextTurn();
        sliceStart = performance.now();
      };
      // Deferred, as knex began it: the write lock is taken by the first write, and a snapshot
      // another process has written past since fails it with SQLITE_BUSY, which is retried.
      const session: WriteSession = {
        rows: async <T>(sql: string, bindings: readonly WriteBinding[]) => {
          await slice();
          return statement(connection, sql).all(bindings) as T[];
        },
        change: async (sql, bindings) => {
          await slice();
          const { changes, lastInsertRowid } = statement(connection, sql).run(bindings);
          return { affectedRows: changes, insertId: Number(lastInsertRowid) };
        },
        // SQLite's writers run one at a time: nothing waits on the statements between these and COMMIT.
        commitWith: async ({ before, take, after }, committing) => {
          // `commits` is false here: COMMIT is ours to send.
          for (const { sql, bindings } of before) {
            await slice();
            statement(connection, sql).run(bindings);
          }
          await slice();
          const revision = lastRevisionOf(statement(connection, take.sql).all(take.bindings));
          for (const { sql, bindings } of after(revision)) {
            await slice();
            statement(connection, sql).run(bindings);
          }
          // COMMIT can take tens of milliseconds itself (an fsync, synchronous=FULL, and at times a WAL
          // checkpoint): it starts a slice of its own unless this one is less than half over.
          await slice(SQLITE_SLICE_MS / 2);
          committing();
          run("COMMIT");
          committed = true;
          return revision;
        },
      };
      run("BEGIN");
      try {
        const result = await work(session);
        if (!committed) run("COMMIT");
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

/** The last revision a `take` statement answered, as `[{revision}]`. */
function lastRevisionOf(rows: readonly unknown[]): number {
  const [row] = rows as Array<{ revision?: number | string | bigint } | undefined>;
  const revision = Number(row?.revision);
  if (!Number.isSafeInteger(revision) || revision < 1) throw new Error("Taking the tenant's revisions answered none.");
  return revision;
}
