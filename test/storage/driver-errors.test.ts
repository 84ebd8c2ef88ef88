import { describe, expect, it } from "vitest";
import { classifyDriverError, isDuplicateKey } from "../../src/storage/driver-errors.js";

function withCode(code: string, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error("message text is never looked at"), { code, ...extra });
}

describe("classifyDriverError", () => {
  it("retries duplicate keys, deadlocks and lock waits of both drivers", () => {
    for (const code of ["ER_DUP_ENTRY", "ER_LOCK_DEADLOCK", "ER_LOCK_WAIT_TIMEOUT", "SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY", "SQLITE_BUSY", "SQLITE_BUSY_SNAPSHOT"]) {
      expect(classifyDriverError(withCode(code)), code).toBe("retryable");
    }
    expect(classifyDriverError(Object.assign(new Error("x"), { errno: 1213 }))).toBe("retryable");
  });

  it("reports connection failures and pool timeouts as unavailable", () => {
    for (const code of ["ECONNREFUSED", "ETIMEDOUT", "PROTOCOL_CONNECTION_LOST", "ER_CON_COUNT_ERROR", "ER_QUERY_INTERRUPTED"]) {
      expect(classifyDriverError(withCode(code)), code).toBe("unavailable");
    }
    const poolTimeout = new Error("Knex: Timeout acquiring a connection.");
    poolTimeout.name = "KnexTimeoutError";
    expect(classifyDriverError(poolTimeout)).toBe("unavailable");
  });

  it("reports a mysql2 error marked fatal (a command on a closed connection has no code) as unavailable", () => {
    expect(classifyDriverError(Object.assign(new Error("Can't add new command when connection is in closed state"), { fatal: true }))).toBe("unavailable");
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
    for (const code of ["ER_LOCK_DEADLOCK", "SQLITE_BUSY", "SQLITE_CONSTRAINT_FOREIGNKEY", "SQLITE_CONSTRAINT_TRIGGER", "ECONNREFUSED"]) {
      expect(isDuplicateKey(withCode(code)), code).toBe(false);
    }
    expect(isDuplicateKey(new Error("Duplicate entry 'x' for key 'PRIMARY'"))).toBe(false);
    expect(isDuplicateKey(undefined)).toBe(false);
  });
});
