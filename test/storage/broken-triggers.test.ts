/**
 * MariaDB parses a table's triggers when it opens a new instance of the table, and a statement stopped
 * during that parse leaves the instance in the table cache with its triggers broken: every INSERT,
 * UPDATE or DELETE that then gets it fails with 1064 "... has an error in its body" (src/storage/run/
 * broken-triggers.ts). On the test cluster a frozen node's fail-over answered 421 writes INTERNAL so
 * (test/cluster/failover.test.ts). Here the state is made on the plain MariaDB the way the server makes
 * it, by a statement stopped at its max_statement_time while it opens agent_definitions, and a write
 * that meets it reloads the triggers and succeeds.
 */
import { createConnection } from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import { type Database, openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { testDatabases, useFreshDatabase } from "../support/databases.js";
import { mysqlConnectionOptions } from "../support/mysql-url.js";
import { definition, save } from "./fixtures.js";

const mariadb = testDatabases().find((db) => db.name === "mariadb");

describe.skipIf(mariadb === undefined || mariadb.skip)("on mariadb", () => {
  const target = useFreshDatabase(mariadb!);
  let repository: AgentDefinitionRepository;
  let raw: Database;

  beforeAll(async () => {
    repository = await createSqlRepository(target());
    raw = await openDatabase(target());
  });

  afterAll(async () => {
    await repository?.close();
    await raw?.db.destroy();
  });

  /**
   * The error an UPDATE of a row of agent_definitions (changing nothing) fails with, if any: MariaDB checks
   * the triggers when they are to run on a row, so a statement that reaches no row does not see them broken.
   */
  const dmlError = (): Promise<unknown> =>
    raw.db.raw("UPDATE agent_definitions SET seq = seq ORDER BY seq LIMIT 1").then(
      () => undefined,
      (error: unknown) => error,
    );

  /** The definitions stored, of every tenant. */
  const count = async (): Promise<number> =>
    ((await raw.db.raw("SELECT COUNT(*) AS n FROM agent_definitions")) as [Array<{ n: number }>])[0][0]!.n;

  /**
   * Drops the cached instances of agent_definitions and stops the next statement that opens one (a SELECT,
   * as a search would, the first of a new connection) at a time limit from 10 µs up, until one stopped
   * while the triggers were parsed (about 1 in 10 did on this machine): the error the broken instance
   * answers.
   */
  async function breakTriggers(): Promise<unknown> {
    for (let i = 0; i < 1000; i++) {
      await raw.db.raw("FLUSH LOCAL TABLES agent_definitions");
      const seconds = ((1 + (i % 200)) * 10) / 1e6;
      const victim = await createConnection(mysqlConnectionOptions(target().databaseUrl as string));
      await victim
        .query(`SET STATEMENT max_statement_time = ${seconds} FOR SELECT seq FROM agent_definitions WHERE seq = 0`)
        .catch(() => undefined)
        .finally(() => victim.end());
      const error = await dmlError();
      if (error !== undefined) return error;
    }
    throw new Error("No statement stopped while agent_definitions' triggers were parsed in 1000 tries.");
  }

  it("a write that meets broken triggers reloads them and is stored, with the counters they keep", async () => {
    await save(repository, definition({ name: "Before the break" }));
    const broken = await breakTriggers();
    expect(broken).toMatchObject({ errno: 1064, sqlMessage: expect.stringContaining("has an error in its body") });
    // It stays broken for every statement that gets that instance, whichever the connection.
    expect(await dmlError()).toMatchObject({ errno: 1064 });

    const saved = await save(repository, definition({ name: "After the break" }));
    expect(saved.stored.revision).toBe(1);
    expect(repository.writeRetries().triggers_reloaded).toBe(1);
    expect(await dmlError()).toBeUndefined();

    // The insert trigger ran for both definitions: the list's counters match the table.
    const [[counted]] = (await raw.db.raw(
      "SELECT (SELECT COUNT(*) FROM agent_definitions) AS n, (SELECT SUM(n) FROM definition_counts) AS counted",
    )) as [Array<{ n: number; counted: string }>];
    expect(counted).toEqual({ n: 2, counted: "2" });
  });

  it("writers that meet broken triggers together reload them with one flush, and every write is stored", async () => {
    const flushes = async () =>
      Number(((await raw.db.raw("SHOW GLOBAL STATUS LIKE 'Com_flush'")) as [Array<{ Value: string }>])[0][0]!.Value);
    const before = await count();
    expect(await breakTriggers()).toMatchObject({ errno: 1064 });
    // Nothing else on this server flushes (the statement is the registry's reload and this test's break).
    const flushedBefore = await flushes();
    const metBefore = repository.writeRetries().triggers_reloaded;

    const saved = await Promise.all(
      Array.from({ length: 20 }, (_, i) => save(repository, definition({ name: `Together ${i}` }))),
    );
    expect(saved.filter((write) => write.created)).toHaveLength(20);
    expect(await count()).toBe(before + 20);
    // Each writer that met them was counted, and the flush ran once for all of them.
    expect(repository.writeRetries().triggers_reloaded - metBefore).toBeGreaterThan(0);
    expect((await flushes()) - flushedBefore).toBe(1);
    expect(await dmlError()).toBeUndefined();
  });

  it("a write whose reload is refused is answered UNAVAILABLE and stores nothing", async () => {
    // A user with every privilege on the database but not RELOAD, which FLUSH needs.
    const user = `asor_noreload_${process.pid}`;
    await raw.db.raw(`CREATE OR REPLACE USER ?@'%' IDENTIFIED BY 'noreload'`, [user]);
    const url = new URL(target().databaseUrl as string);
    await raw.db.raw(`GRANT ALL ON \`${url.pathname.slice(1)}\`.* TO ?@'%'`, [user]);
    url.username = user;
    url.password = "noreload";
    const limited = await createSqlRepository({ ...target(), databaseUrl: url.toString() });
    try {
      const before = await count();
      expect(await breakTriggers()).toMatchObject({ errno: 1064 });

      const refused = await save(limited, definition({ name: "Not stored" })).catch((error: unknown) => error);
      expect(refused).toMatchObject({ code: "UNAVAILABLE", message: expect.stringContaining("triggers failed") });
      expect(await count()).toBe(before);
      expect(limited.writeRetries().triggers_reloaded).toBe(0);
    } finally {
      await limited.close();
      await raw.db.raw("FLUSH LOCAL TABLES agent_definitions");
      await raw.db.raw("DROP USER ?@'%'", [user]);
    }
  });
});
