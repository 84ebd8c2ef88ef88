/**
 * Translation of database driver errors into what the repository does next.
 * Drivers and knex wrap errors differently (knex rewrites messages, mysql2
 * sets `code`/`errno`, better-sqlite3 sets extended `code`s, Node's `net`
 * raises AggregateErrors), so we look at codes along the whole cause chain and
 * never at messages, which change between versions and locales. Under Deno the
 * embedded database is `node:sqlite`, whose numeric result codes
 * sqlite-client.ts names with sqliteResultCodeName, as better-sqlite3 does.
 */

/** What a failed database call means for the caller. */
export type DriverErrorKind =
  /** A race with another writer: running the transaction again can succeed. */
  | "retryable"
  /** The database cannot be reached or did not hand out a connection in time. */
  | "unavailable"
  /** Anything else: a bug or a broken schema, surfaced as it is. */
  | "other";

const retryableCodes = new Set([
  "ER_DUP_ENTRY", // 1062: another transaction inserted the same key first
  "ER_LOCK_DEADLOCK", // 1213: InnoDB rolled us back; gap locks on a missing key race this way
  "ER_LOCK_WAIT_TIMEOUT", // 1205
  "SQLITE_CONSTRAINT_UNIQUE",
  "SQLITE_CONSTRAINT_PRIMARYKEY",
]);

const retryableErrnos = new Set([1062, 1205, 1213]);

/**
 * The server stopped a statement at the time limit it was given (run/searches.ts):
 * MariaDB's max_statement_time (1969; mysql2 knows no name for it, only the
 * errno) and MySQL's MAX_EXECUTION_TIME (3024). Unavailable, and told apart
 * by isStatementTimeout.
 */
const statementTimeoutCodes = new Set(["ER_STATEMENT_TIMEOUT", "ER_QUERY_TIMEOUT"]);
const statementTimeoutErrnos = new Set([1969, 3024]);

const unavailableCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
  "PROTOCOL_CONNECTION_LOST",
  "PROTOCOL_SEQUENCE_TIMEOUT",
  "ER_CON_COUNT_ERROR", // 1040: the server is full
  "ER_SERVER_SHUTDOWN", // 1053
  "ER_QUERY_INTERRUPTED", // 1317: the server killed the statement (a timeout, KILL QUERY)
  "ER_CONNECTION_KILLED", // 1927 (MariaDB)
  // 1047: what a Galera node that is not ready for queries (joining, or out of the primary component)
  // answers a statement on a table with: "WSREP has not yet prepared node for application use".
  "ER_UNKNOWN_COM_ERROR",
  "ER_NET_READ_ERROR", // 1158..1161: the server lost the connection mid-packet
  "ER_NET_READ_INTERRUPTED",
  "ER_NET_ERROR_ON_WRITE",
  "ER_NET_WRITE_INTERRUPTED",
  ...statementTimeoutCodes,
  "CR_CONNECTION_ERROR",
  "CR_CONN_HOST_ERROR",
  "CR_SERVER_GONE_ERROR",
  "CR_SERVER_LOST",
]);

const unavailableErrnos = new Set([
  1040,
  1047,
  1053,
  1158,
  1159,
  1160,
  1161,
  1317,
  1927,
  2002,
  2003,
  2006,
  2013,
  ...statementTimeoutErrnos,
]);

/** Classifies an error thrown by knex or a driver, looking at every error it wraps. */
export function classifyDriverError(error: unknown): DriverErrorKind {
  let kind: DriverErrorKind = "other";
  for (const candidate of errorChain(error)) {
    const own = classifyOne(candidate);
    // A connection failure wins over anything it caused further up the chain.
    if (own === "unavailable") return own;
    if (own === "retryable") kind = own;
  }
  return kind;
}

function classifyOne(error: object): DriverErrorKind {
  const { code, errno, name, fatal } = error as { code?: unknown; errno?: unknown; name?: unknown; fatal?: unknown };
  // knex's pool gave up waiting for a connection: the database is overloaded or gone.
  if (name === "KnexTimeoutError") return "unavailable";
  if (typeof code === "string") {
    if (unavailableCodes.has(code)) return "unavailable";
    if (retryableCodes.has(code)) return "retryable";
    // SQLITE_BUSY_SNAPSHOT and friends: another connection holds or changed the write lock.
    if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) return "retryable";
    // The embedded database's file cannot be read, written or opened (a failing or full disk):
    // unavailable, as a database server that went away is, not a bug of ours.
    if (code.startsWith("SQLITE_IOERR") || code.startsWith("SQLITE_CANTOPEN") || code === "SQLITE_FULL")
      return "unavailable";
  }
  if (typeof errno === "number") {
    if (unavailableErrnos.has(errno)) return "unavailable";
    if (retryableErrnos.has(errno)) return "retryable";
  }
  // mysql2 marks what leaves the connection unusable as fatal, some without a code: the ROLLBACK
  // knex sends after a lost connection fails with "Can't add new command when connection is in
  // closed state", and knex rejects the transaction with that error rather than the loss.
  if (fatal === true) return "unavailable";
  return "other";
}

/** The error, its causes and, for AggregateErrors, their members; bounded against cycles. */
function* errorChain(error: unknown): Generator<object> {
  const pending: unknown[] = [error];
  const seen = new Set<unknown>();
  while (pending.length > 0 && seen.size < 32) {
    const current = pending.shift();
    if (typeof current !== "object" || current === null || seen.has(current)) continue;
    seen.add(current);
    yield current;
    const { cause, errors } = current as { cause?: unknown; errors?: unknown };
    pending.push(cause);
    if (Array.isArray(errors)) pending.push(...errors);
  }
}

/**
 * True when the error says the database node itself failed: unavailable, but not a statement the
 * server stopped at its time limit or on a KILL QUERY (run/searches.ts stops searches so: the node is
 * fine), nor knex's pool giving up waiting for a connection (a full pool, or a connect still under
 * way that will say for itself whether its node failed). The pool then moves to another host
 * (connection.ts), and what failed before COMMIT is tried there (sql-writer.ts).
 */
export function isNodeFailure(error: unknown): boolean {
  if (classifyDriverError(error) !== "unavailable" || isStatementTimeout(error)) return false;
  for (const candidate of errorChain(error)) {
    const { code, errno, name } = candidate as { code?: unknown; errno?: unknown; name?: unknown };
    if (code === "ER_QUERY_INTERRUPTED" || errno === 1317 || name === "KnexTimeoutError") return false;
  }
  return true;
}

/**
 * True when the error (or one it wraps) is the server stopping a statement at
 * the time limit it was given (run/searches.ts limits the searches): not a
 * failure of the database, a search too costly to finish in time.
 */
export function isStatementTimeout(error: unknown): boolean {
  for (const candidate of errorChain(error)) {
    const { code, errno } = candidate as { code?: unknown; errno?: unknown };
    if (typeof code === "string" && statementTimeoutCodes.has(code)) return true;
    if (typeof errno === "number" && statementTimeoutErrnos.has(errno)) return true;
  }
  return false;
}

/**
 * True when the error (or one it wraps) is MySQL's ER_PARSE_ERROR (1064). The registry's statements are
 * fixed text, so at run time this is not a statement of ours but a table's triggers that failed to load
 * on the node: an instance of the table left broken in its table cache (run/broken-triggers.ts).
 */
export function isBrokenTriggers(error: unknown): boolean {
  for (const candidate of errorChain(error)) {
    const { code, errno } = candidate as { code?: unknown; errno?: unknown };
    if (code === "ER_PARSE_ERROR" || errno === 1064) return true;
  }
  return false;
}

/** Which race a retryable error (classifyDriverError) is. */
export type RaceKind = "deadlock" | "lock_wait_timeout" | "duplicate_key" | "busy";

/** The race a retryable error is: by code along the chain, the first that names one. */
export function raceKind(error: unknown): RaceKind {
  for (const candidate of errorChain(error)) {
    const { code, errno } = candidate as { code?: unknown; errno?: unknown };
    if (code === "ER_LOCK_DEADLOCK" || errno === 1213) return "deadlock";
    if (code === "ER_LOCK_WAIT_TIMEOUT" || errno === 1205) return "lock_wait_timeout";
    if ((typeof code === "string" && duplicateKeyCodes.has(code)) || errno === 1062) return "duplicate_key";
  }
  return "busy";
}

const duplicateKeyCodes = new Set(["ER_DUP_ENTRY", "SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"]);

/** True when the error (or one it wraps) is a unique or primary key violation. */
export function isDuplicateKey(error: unknown): boolean {
  for (const candidate of errorChain(error)) {
    const { code, errno } = candidate as { code?: unknown; errno?: unknown };
    if (typeof code === "string" && duplicateKeyCodes.has(code)) return true;
    if (errno === 1062) return true;
  }
  return false;
}

/**
 * True when the error (or one it wraps) is SQLite's SQLITE_BUSY: another
 * connection, of this process or another, holds the write lock or committed
 * past this transaction's snapshot.
 */
export function isSqliteBusy(error: unknown): boolean {
  for (const candidate of errorChain(error)) {
    const { code } = candidate as { code?: unknown };
    if (typeof code === "string" && code.startsWith("SQLITE_BUSY")) return true;
  }
  return false;
}

/** SQLite's primary result codes, by number (sqlite3.h). */
const sqlitePrimaryCodes = (
  "OK ERROR INTERNAL PERM ABORT BUSY LOCKED NOMEM READONLY INTERRUPT IOERR CORRUPT NOTFOUND FULL CANTOPEN " +
  "PROTOCOL EMPTY SCHEMA TOOBIG CONSTRAINT MISMATCH MISUSE NOLFS AUTH FORMAT RANGE NOTADB NOTICE WARNING"
).split(" ");

/**
 * The extended result codes of the primary codes the classification looks at:
 * the i-th name is the code `primary | (i + 1) << 8` (sqlite3.h).
 */
const sqliteExtendedCodes: Readonly<Record<number, readonly string[]>> = {
  5: "RECOVERY SNAPSHOT TIMEOUT".split(" "),
  6: "SHAREDCACHE VTAB".split(" "),
  10: (
    "READ SHORT_READ WRITE FSYNC DIR_FSYNC TRUNCATE FSTAT UNLOCK RDLOCK DELETE BLOCKED NOMEM ACCESS " +
    "CHECKRESERVEDLOCK LOCK CLOSE " +
    "DIR_CLOSE SHMOPEN SHMSIZE SHMLOCK SHMMAP SEEK DELETE_NOENT MMAP GETTEMPPATH CONVPATH VNODE AUTH BEGIN_ATOMIC " +
    "COMMIT_ATOMIC " +
    "ROLLBACK_ATOMIC DATA CORRUPTFS"
  ).split(" "),
  14: "NOTEMPDIR ISDIR FULLPATH CONVPATH DIRTYWAL SYMLINK".split(" "),
  19: "CHECK COMMITHOOK FOREIGNKEY FUNCTION NOTNULL PRIMARYKEY TRIGGER UNIQUE VTAB ROWID PINNED DATATYPE".split(" "),
};

/**
 * The name better-sqlite3 gives an SQLite result code (2067: `SQLITE_CONSTRAINT_UNIQUE`):
 * the extended name where the classification needs it, else the primary one.
 */
export function sqliteResultCodeName(resultCode: number): string {
  const primary = resultCode & 0xff;
  const extended = sqliteExtendedCodes[primary]?.[(resultCode >> 8) - 1];
  return `SQLITE_${sqlitePrimaryCodes[primary] ?? "UNKNOWN"}${extended === undefined ? "" : `_${extended}`}`;
}
