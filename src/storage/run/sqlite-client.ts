/**
 * The embedded database's knex client on either runtime: knex's own
 * better-sqlite3 dialect, whose driver is better-sqlite3 under Node and,
 * under Deno, a shim over Deno's built-in `node:sqlite` (`DatabaseSync`).
 * better-sqlite3 is a native addon built on V8's own API (nan), which Deno
 * cannot load (it loads Node-API addons only); Node 20 has no `node:sqlite`.
 * Both open the same file format (WAL included), so a file written by one
 * runtime is read by the other.
 *
 * The shim offers the part of better-sqlite3's API that knex's dialect,
 * connection.ts and the runners (driver.ts) use, with its conventions:
 * bindings as one array, `reader` on statements, `pragma`, `inTransaction`,
 * and errors whose `code` is the SQLite result code's name
 * (`SQLITE_CONSTRAINT_UNIQUE`, `SQLITE_BUSY`...), so driver-errors.ts
 * classifies them as it does better-sqlite3's.
 */
import { createRequire } from "node:module";
import type { Knex } from "knex";
import { sqliteResultCodeName } from "./driver-errors.js";

const require = createRequire(import.meta.url);

/** The part of `node:sqlite`'s StatementSync the shim uses. */
interface NodeSqliteStatement {
  all(...bindings: unknown[]): unknown[];
  iterate(...bindings: unknown[]): IterableIterator<unknown>;
  run(...bindings: unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  columns(): unknown[];
  setReadBigInts(enabled: boolean): void;
}

/** The part of `node:sqlite`'s DatabaseSync the shim uses. */
interface NodeSqliteDatabase {
  prepare(sql: string): NodeSqliteStatement;
  function(name: string, options: { deterministic?: boolean }, fn: (...args: unknown[]) => unknown): void;
  exec(sql: string): void;
  close(): void;
  readonly isTransaction: boolean;
}

type DatabaseSyncConstructor = new (path: string, options?: { readOnly?: boolean }) => NodeSqliteDatabase;

/** True under Deno, where better-sqlite3 cannot load and `node:sqlite` is built in. */
export const usesNodeSqlite = "Deno" in globalThis;

/**
 * The knex client class for the embedded database: pass it as `client` in
 * the knex config. Knex's better-sqlite3 dialect, with the driver this
 * runtime can load.
 */
export function sqliteClient(): typeof Knex.Client {
  const BetterSqlite3Client = require("knex/lib/dialects/better-sqlite3") as typeof Knex.Client;
  if (!usesNodeSqlite) return BetterSqlite3Client;
  const driver = sqliteDriver();
  return class NodeSqliteClient extends BetterSqlite3Client {
    _driver(): unknown {
      return driver;
    }
  };
}

/** The part of a better-sqlite3 `Database` that a connection opened outside knex uses. */
export interface SqliteDatabase {
  prepare(sql: string): {
    all(bindings: readonly unknown[]): unknown[];
    iterate(bindings: readonly unknown[]): IterableIterator<unknown>;
  };
  pragma(source: string): unknown[];
  /** Registers a SQL function (better-sqlite3's `function`). */
  function(name: string, options: { deterministic: boolean }, fn: () => unknown): unknown;
  close(): unknown;
}

/**
 * The driver's `Database` class on this runtime (better-sqlite3, or the shim
 * over `node:sqlite`), for a connection that knex's pool does not hold: the
 * search workers' read-only ones (sqlite-search-worker.ts).
 */
export function sqliteDriver(): new (
  filename: string,
  options?: { readonly?: boolean; fileMustExist?: boolean },
) => SqliteDatabase {
  if (!usesNodeSqlite) return require("better-sqlite3");
  const { DatabaseSync } = require("node:sqlite") as { DatabaseSync: DatabaseSyncConstructor };
  return nodeSqliteDriver(DatabaseSync);
}

/** Rethrows a `node:sqlite` error with `code` set to its result code's name, as better-sqlite3 names it. */
function named<T>(call: () => T): T {
  try {
    return call();
  } catch (error: unknown) {
    const { errcode } = error as { errcode?: unknown };
    if (typeof errcode === "number") (error as { code?: string }).code = sqliteResultCodeName(errcode);
    throw error;
  }
}

/** A better-sqlite3 `Database` class over `node:sqlite`. */
function nodeSqliteDriver(DatabaseSync: DatabaseSyncConstructor) {
  class Statement {
    readonly #statement: NodeSqliteStatement;
    /** True when the statement answers rows (knex's dialect runs it with all(), else run()). */
    readonly reader: boolean;
    constructor(statement: NodeSqliteStatement) {
      this.#statement = statement;
      this.reader = statement.columns().length > 0;
    }
    all(bindings: readonly unknown[] = []): unknown[] {
      return named(() => this.#statement.all(...bindings));
    }
    /**
     * The rows one at a time. Deno 2.9's `all()` goes on past an error a SQL
     * function throws (the search workers' stop, SEARCH_ALIVE), where `iterate()`
     * ends with it, as better-sqlite3's `all()` does.
     */
    *iterate(bindings: readonly unknown[] = []): IterableIterator<unknown> {
      const rows = named(() => this.#statement.iterate(...bindings));
      for (;;) {
        const next = named(() => rows.next());
        if (next.done === true) return;
        yield next.value;
      }
    }
    run(bindings: readonly unknown[] = []): { changes: number; lastInsertRowid: number | bigint } {
      const { changes, lastInsertRowid } = named(() => this.#statement.run(...bindings));
      return { changes: Number(changes), lastInsertRowid };
    }
    safeIntegers(enabled = true): this {
      this.#statement.setReadBigInts(enabled);
      return this;
    }
  }

  return class Database {
    readonly #db: NodeSqliteDatabase;
    #safeIntegers = false;
    constructor(filename: string, options: { readonly?: boolean } = {}) {
      this.#db = named(() => new DatabaseSync(filename, { readOnly: options.readonly === true }));
    }
    prepare(sql: string): Statement {
      const statement = new Statement(named(() => this.#db.prepare(sql)));
      return this.#safeIntegers ? statement.safeIntegers(true) : statement;
    }
    /** A SQL function, as better-sqlite3's `function(name, options, fn)`. */
    function(name: string, options: { deterministic?: boolean }, fn: (...args: unknown[]) => unknown): this {
      named(() => this.#db.function(name, { deterministic: options.deterministic === true }, fn));
      return this;
    }
    /** `PRAGMA <source>`, answering its rows as better-sqlite3 does. */
    pragma(source: string): unknown[] {
      return this.prepare(`PRAGMA ${source}`).all();
    }
    exec(sql: string): this {
      named(() => this.#db.exec(sql));
      return this;
    }
    defaultSafeIntegers(enabled = true): this {
      this.#safeIntegers = enabled;
      return this;
    }
    get inTransaction(): boolean {
      return this.#db.isTransaction;
    }
    close(): this {
      this.#db.close();
      return this;
    }
  };
}
