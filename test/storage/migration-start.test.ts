/**
 * Starting on a MySQL database whose migration is slow or was cut off
 * (sql-repository.ts createSqlRepository, migrations/index.ts):
 *
 * - the migrations run on a pool of their own whose statements may outlast
 *   DATABASE_TIMEOUT_MS, so a migration that rewrites or indexes a large table
 *   is not cut off by the service's statement timeout;
 * - a knex lock left set by a process that died mid-migration is released by
 *   the next start, which takes over the dead process's expired lease
 *   (migration-lock.ts), instead of failing every start.
 */
import type { Connection } from "mysql2/promise";
import { createConnection } from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrations } from "../../src/storage/migrations/index.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { testDatabases, useFreshDatabase } from "../support/databases.js";
import { mysqlConnectionOptions } from "../support/mysql-url.js";

const mariadb = testDatabases().find((db) => db.name === "mariadb")!;

describe.skipIf(mariadb.skip)("starting on MariaDB", () => {
  const target = useFreshDatabase(mariadb);
  let session: Connection;

  beforeAll(async () => {
    const url = target().databaseUrl;
    if (url === undefined) throw new Error("The MariaDB suite needs a database URL.");
    // The schema as of now, then a second session to tamper with it.
    await (await createSqlRepository(target())).close();
    session = await createConnection(mysqlConnectionOptions(url));
  });

  afterAll(async () => {
    await session?.query("UNLOCK TABLES").catch(() => undefined);
    await session?.end();
  });

  const applied = async (): Promise<string[]> => {
    const [rows] = await session.query("SELECT name FROM knex_migrations ORDER BY id");
    return (rows as Array<{ name: string }>).map((r) => r.name);
  };

  it("releases a knex migration lock that a process which died mid-migration left set", async () => {
    const newest = migrations.at(-1)!.name;
    await session.query("DELETE FROM knex_migrations WHERE name = ?", [newest]);
    await session.query("UPDATE knex_migrations_lock SET is_locked = 1");
    // Its lease, which it stopped renewing when it died: expired a second ago.
    await session.query("UPDATE registry_migration_lock SET owner = 'pid 1 dead', expires_at = ?", [Date.now() - 1000]);
    const repository = await createSqlRepository(target());
    await repository.close();
    expect((await applied()).at(-1)).toBe(newest);
    const [rows] = await session.query("SELECT is_locked FROM knex_migrations_lock");
    expect(rows).toEqual([{ is_locked: 0 }]);
    const [lease] = await session.query("SELECT owner FROM registry_migration_lock");
    expect(lease).toEqual([{ owner: null }]);
  });

  it("lets a migration statement take longer than DATABASE_TIMEOUT_MS", async () => {
    // 0010 undone (it drops and remakes what it made, whatever the later ones did); its first
    // statement that touches definition_terms then waits for this session's table lock, longer
    // than the service's 1 s statement timeout.
    const newest = migrations.find((m) => m.name === "0010-add-term-counts")!;
    expect(newest).toBeDefined();
    await session.query("DELETE FROM knex_migrations WHERE name = ?", [newest.name]);
    await session.query("LOCK TABLES definition_terms WRITE");
    const starting = createSqlRepository({ ...target(), timeoutMs: 1_000 });
    let held = true;
    const settled = starting.then(
      (repository) => ({ repository, held }),
      (error: unknown) => ({ error, held }),
    );
    // 2.5 s with the lock held: well past the 1 s statement timeout the service's pool has.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    held = false;
    await session.query("UNLOCK TABLES");
    const outcome = await settled;
    expect(outcome).not.toHaveProperty("error");
    expect(outcome.held).toBe(false);
    await (outcome as { repository: { close(): Promise<void> } }).repository.close();
    expect((await applied()).at(-1)).toBe(newest.name);
  });
});
