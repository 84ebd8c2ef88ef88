import { describe, expect, it } from "vitest";
import {
  classifyDriverError,
  isBrokenTriggers,
  isDuplicateKey,
  isNodeFailure,
  isSqliteBusy,
  sqliteResultCodeName,
} from "../../src/storage/run/driver-errors.js";

function withCode(code: string, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error("message text is never looked at"), { code, ...extra });
}

describe("classifyDriverError", () => {
  it("reports a Galera node that is not ready (1047) and connections lost mid-statement as node failures", () => {
    // mysql2's error for a query on a node out of the primary component: "WSREP has not yet prepared node
    // for application use".
    const notReady = withCode("ER_UNKNOWN_COM_ERROR", { errno: 1047, sqlState: "08S01" });
    const failures = [
      notReady,
      Object.assign(new Error("x"), { errno: 1047 }),
      withCode("ER_CONNECTION_KILLED", { errno: 1927 }),
      withCode("CR_SERVER_LOST", { errno: 2013 }),
      withCode("ECONNRESET"),
      withCode("PROTOCOL_CONNECTION_LOST", { fatal: true }),
      withCode("PROTOCOL_SEQUENCE_TIMEOUT"),
      withCode("ER_NET_READ_ERROR", { errno: 1158 }),
      withCode("ER_NET_ERROR_ON_WRITE", { errno: 1160 }),
      new Error("knex: wrapped", { cause: notReady }),
    ];
    for (const error of failures) {
      expect(classifyDriverError(error), String((error as { code?: string }).code)).toBe("unavailable");
      expect(isNodeFailure(error), String((error as { code?: string }).code)).toBe(true);
    }
  });

  it("does not take a statement stopped at its time limit, a KILL QUERY or a full pool for a failed node", () => {
    const poolTimeout = Object.assign(new Error("Knex: Timeout acquiring a connection."), { name: "KnexTimeoutError" });
    for (const error of [
      Object.assign(new Error("x"), { errno: 1969 }),
      withCode("ER_QUERY_TIMEOUT", { errno: 3024 }),
      withCode("ER_QUERY_INTERRUPTED", { errno: 1317 }),
      poolTimeout,
    ]) {
      expect(classifyDriverError(error)).toBe("unavailable");
      expect(isNodeFailure(error)).toBe(false);
    }
    for (const error of [withCode("ER_LOCK_DEADLOCK", { errno: 1213 }), withCode("ER_NO_SUCH_TABLE")])
      expect(isNodeFailure(error)).toBe(false);
  });

  it("retries duplicate keys, deadlocks and lock waits of both drivers", () => {
    for (const code of [
      "ER_DUP_ENTRY",
      "ER_LOCK_DEADLOCK",
      "ER_LOCK_WAIT_TIMEOUT",
      "SQLITE_CONSTRAINT_UNIQUE",
      "SQLITE_CONSTRAINT_PRIMARYKEY",
      "SQLITE_BUSY",
      "SQLITE_BUSY_SNAPSHOT",
    ]) {
      expect(classifyDriverError(withCode(code)), code).toBe("retryable");
    }
    expect(classifyDriverError(Object.assign(new Error("x"), { errno: 1213 }))).toBe("retryable");
  });

  it("reports connection failures and pool timeouts as unavailable", () => {
    for (const code of [
      "ECONNREFUSED",
      "ETIMEDOUT",
      "PROTOCOL_CONNECTION_LOST",
      "ER_CON_COUNT_ERROR",
      "ER_QUERY_INTERRUPTED",
    ]) {
      expect(classifyDriverError(withCode(code)), code).toBe("unavailable");
    }
    const poolTimeout = new Error("Knex: Timeout acquiring a connection.");
    poolTimeout.name = "KnexTimeoutError";
    expect(classifyDriverError(poolTimeout)).toBe("unavailable");
  });

  it(
    "reports the embedded database's file failing to be read, written or opened (SQLite I/O, full, cannot open) " +
      "as unavailable",
    () => {
      for (const code of [
        "SQLITE_IOERR",
        "SQLITE_IOERR_WRITE",
        "SQLITE_IOERR_FSYNC",
        "SQLITE_FULL",
        "SQLITE_CANTOPEN",
      ]) {
        expect(classifyDriverError(withCode(code)), code).toBe("unavailable");
      }
    },
  );

  it("reports a mysql2 error marked fatal (a command on a closed connection has no code) as unavailable", () => {
    expect(
      classifyDriverError(
        Object.assign(new Error("Can't add new command when connection is in closed state"), { fatal: true }),
      ),
    ).toBe("unavailable");
    expect(classifyDriverError(Object.assign(new Error("x"), { fatal: false }))).toBe("other");
  });

  it("finds the code along the cause chain and inside AggregateErrors", () => {
    expect(classifyDriverError(new Error("wrapped", { cause: withCode("ER_DUP_ENTRY") }))).toBe("retryable");
    expect(classifyDriverError(new AggregateError([new Error("a"), withCode("ECONNREFUSED")]))).toBe("unavailable");
  });

  it("leaves everything else alone, whatever its message says", () => {
    expect(classifyDriverError(new Error("Duplicate entry 'x' for key 'PRIMARY' (ER_DUP_ENTRY)"))).toBe("other");
    expect(classifyDriverError(withCode("ER_PARSE_ERROR"))).toBe("other");
    expect(classifyDriverError(withCode("SQLITE_CONSTRAINT_FOREIGNKEY"))).toBe("other");
    expect(classifyDriverError("not an error")).toBe("other");
    const cyclic: Error & { cause?: unknown } = new Error("cycle");
    cyclic.cause = cyclic;
    expect(classifyDriverError(cyclic)).toBe("other");
  });
});

describe("isDuplicateKey", () => {
  it("recognises unique and primary key violations of both drivers, wrapped or not", () => {
    for (const code of ["ER_DUP_ENTRY", "SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"]) {
      expect(isDuplicateKey(withCode(code)), code).toBe(true);
    }
    expect(isDuplicateKey(Object.assign(new Error("x"), { errno: 1062 }))).toBe(true);
    expect(isDuplicateKey(new Error("wrapper", { cause: withCode("ER_DUP_ENTRY") }))).toBe(true);
  });

  it("does not take other failures, races included, for duplicates", () => {
    for (const code of [
      "ER_LOCK_DEADLOCK",
      "SQLITE_BUSY",
      "SQLITE_CONSTRAINT_FOREIGNKEY",
      "SQLITE_CONSTRAINT_TRIGGER",
      "ECONNREFUSED",
    ]) {
      expect(isDuplicateKey(withCode(code)), code).toBe(false);
    }
    expect(isDuplicateKey(new Error("Duplicate entry 'x' for key 'PRIMARY'"))).toBe(false);
    expect(isDuplicateKey(undefined)).toBe(false);
  });
});

describe("isBrokenTriggers", () => {
  it("recognises MySQL's parse error (1064), wrapped or not, and nothing else", () => {
    // What MariaDB answers a write on a table instance whose triggers failed to load (run/broken-triggers.ts).
    const broken = withCode("ER_PARSE_ERROR", { errno: 1064, sqlState: "42000" });
    expect(isBrokenTriggers(broken)).toBe(true);
    expect(isBrokenTriggers(Object.assign(new Error("x"), { errno: 1064 }))).toBe(true);
    expect(isBrokenTriggers(new Error("knex", { cause: broken }))).toBe(true);
    expect(classifyDriverError(broken)).toBe("other");
    for (const other of [
      withCode("ER_QUERY_INTERRUPTED", { errno: 1317 }),
      withCode("ER_LOCK_DEADLOCK", { errno: 1213 }),
      withCode("SQLITE_ERROR"),
      new Error("You have an error in your SQL syntax"),
    ])
      expect(isBrokenTriggers(other)).toBe(false);
  });
});

describe("sqliteResultCodeName", () => {
  it("names node:sqlite's numeric result codes as better-sqlite3 names them", () => {
    expect(sqliteResultCodeName(2067)).toBe("SQLITE_CONSTRAINT_UNIQUE");
    expect(sqliteResultCodeName(1555)).toBe("SQLITE_CONSTRAINT_PRIMARYKEY");
    expect(sqliteResultCodeName(787)).toBe("SQLITE_CONSTRAINT_FOREIGNKEY");
    expect(sqliteResultCodeName(5)).toBe("SQLITE_BUSY");
    expect(sqliteResultCodeName(517)).toBe("SQLITE_BUSY_SNAPSHOT");
    expect(sqliteResultCodeName(6)).toBe("SQLITE_LOCKED");
    expect(sqliteResultCodeName(778)).toBe("SQLITE_IOERR_WRITE");
    expect(sqliteResultCodeName(13)).toBe("SQLITE_FULL");
    expect(sqliteResultCodeName(14)).toBe("SQLITE_CANTOPEN");
    expect(sqliteResultCodeName(1)).toBe("SQLITE_ERROR");
  });

  it("classifies a named node:sqlite error as the same better-sqlite3 error", () => {
    for (const [errcode, kind] of [
      [2067, "retryable"],
      [517, "retryable"],
      [778, "unavailable"],
      [787, "other"],
    ] as const) {
      expect(classifyDriverError(withCode(sqliteResultCodeName(errcode))), String(errcode)).toBe(kind);
    }
  });
});

describe("isSqliteBusy", () => {
  it("recognises SQLite's busy codes, wrapped or not, and nothing else", () => {
    for (const code of ["SQLITE_BUSY", "SQLITE_BUSY_SNAPSHOT", "SQLITE_BUSY_TIMEOUT"])
      expect(isSqliteBusy(withCode(code)), code).toBe(true);
    expect(isSqliteBusy(new Error("wrapper", { cause: withCode("SQLITE_BUSY_SNAPSHOT") }))).toBe(true);
    for (const code of ["SQLITE_LOCKED", "SQLITE_CONSTRAINT_UNIQUE", "ER_LOCK_DEADLOCK", "ER_DUP_ENTRY"])
      expect(isSqliteBusy(withCode(code)), code).toBe(false);
    expect(isSqliteBusy(new Error("SQLITE_BUSY: database is locked"))).toBe(false);
  });
});
