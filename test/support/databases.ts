/**
 * The databases every storage-backed suite runs against: embedded SQLite
 * always, MySQL/MariaDB when the global setup found a server. Each `create()`
 * makes a fresh, isolated database, so test files can run in parallel.
 *
 *   forEachDatabase((db) => {
 *     const target = useFreshDatabase(db);
 *     it("...", async () => { const repo = await createSqlRepository(target()); ... });
 *   });
 *
 * or `describe.each(testDatabases())("on $name", (db) => ...)` with
 * `describe.skipIf(db.skip)` inside.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createConnection } from "mysql2/promise";
import { afterAll, beforeAll, describe, inject } from "vitest";
import { mysqlConnectionOptions, withDatabase } from "./mysql-url.js";

/** A database made for one test file or suite; pass it to createSqlRepository or the server config. */
export interface FreshDatabase {
  /** Set for MySQL; absent means SQLite in `dataDir`. */
  readonly databaseUrl?: string;
  /** A new temporary directory (the SQLite file lives here). */
  readonly dataDir: string;
  /** Drops the database and removes `dataDir`. */
  cleanup(): Promise<void>;
}

/** One kind of database the suites run against. */
export interface TestDatabase {
  readonly name: "sqlite" | "mariadb";
  /** True when this database is not available in this run; its suite must be skipped. */
  readonly skip: boolean;
  /** Makes a fresh, empty database (no schema: the repository migrates on start). */
  create(): Promise<FreshDatabase>;
  /** For describe.each's `%s`. */
  toString(): string;
}

/** The databases of this run, SQLite first. */
export function testDatabases(): TestDatabase[] {
  const mysqlUrl = inject("mysqlUrl");
  return [
    { name: "sqlite", skip: false, create: createSqliteDatabase, toString: () => "sqlite" },
    {
      name: "mariadb",
      skip: mysqlUrl === null,
      create: () => {
        if (mysqlUrl === null) throw new Error("No MySQL server in this run; the suite should have been skipped.");
        return createMysqlDatabase(mysqlUrl);
      },
      toString: () => "mariadb",
    },
  ];
}

/** Declares `describe("on <name>")` for each database, skipping the ones this run lacks. */
export function forEachDatabase(body: (db: TestDatabase) => void): void {
  for (const db of testDatabases()) {
    describe.skipIf(db.skip)(`on ${db.name}`, () => body(db));
  }
}

/**
 * Creates a fresh database before the enclosing suite and removes it after;
 * the returned function gives it to the tests.
 */
export function useFreshDatabase(db: TestDatabase): () => FreshDatabase {
  let fresh: FreshDatabase | undefined;
  beforeAll(async () => {
    fresh = await db.create();
  });
  afterAll(async () => {
    await fresh?.cleanup();
  });
  return () => {
    if (fresh === undefined) throw new Error("The fresh database is only available inside tests of its suite.");
    return fresh;
  };
}

async function createSqliteDatabase(): Promise<FreshDatabase> {
  const dataDir = await mkdtemp(join(tmpdir(), "asor-test-"));
  return { dataDir, cleanup: () => rm(dataDir, { recursive: true, force: true }) };
}

async function createMysqlDatabase(serverUrl: string): Promise<FreshDatabase> {
  // Random names keep parallel test files (and parallel runs) apart.
  const database = `asor_test_${randomBytes(6).toString("hex")}`;
  await administer(serverUrl, `CREATE DATABASE \`${database}\` CHARACTER SET utf8mb4`);
  const dataDir = await mkdtemp(join(tmpdir(), "asor-test-"));
  return {
    databaseUrl: withDatabase(serverUrl, database),
    dataDir,
    async cleanup() {
      await administer(serverUrl, `DROP DATABASE IF EXISTS \`${database}\``);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

async function administer(serverUrl: string, sql: string): Promise<void> {
  const connection = await createConnection(mysqlConnectionOptions(serverUrl, ""));
  try {
    await connection.query(sql);
  } finally {
    await connection.end();
  }
}
