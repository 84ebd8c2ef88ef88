/**
 * The bench's seeding (bench/seed.ts, issue 24 item 3) writes straight into
 * the tables with its term counters' trigger suspended (bench/bulk-load.ts):
 * the seeded database must end as the service's own writes would leave it.
 * On both databases: the schema (tables, indexes, triggers) ends as the
 * migrations made it, every counter equals the COUNT(*) of what it counts,
 * the list's totals are exact, and a write of the service after the seeding
 * still moves the counters. A seeding that died with the trigger (and on
 * SQLite the terms' lookup index) dropped leaves a record, and the next
 * top-up makes them again even when it adds nothing. And a database that is not the bench's own
 * is refused before anything changes.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import type { Knex } from "knex";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { createBenchDatabase } from "../../bench/bench-database.js";
import {
  benchDatabaseGuard,
  SUSPENDED_TABLE,
  suspendForBulkLoad,
  TERM_COUNT_TRIGGER,
  TERM_LOOKUP_INDEX,
} from "../../bench/bulk-load.js";
import {
  ONE_PERCENT_SECOND_WORD,
  ONE_PERCENT_TAG,
  ONE_PERCENT_WORD,
  onePercentOf,
  openSeeder,
} from "../../bench/seed.js";
import { SkillTagSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { parseListQuery } from "../../src/domain/list-query.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { definition, save } from "../storage/fixtures.js";
import { groupCounts } from "../support/counters.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { listRequestParts } from "../support/list-request-parts.js";

const TENANT = "bench";
/** Seeded in two top-ups: the second adds to a tenant that has definitions and counters already. */
const FIRST = 1_700;
const SIZE = 4_000;

type Dialect = "mysql" | "sqlite";

/** The schema as the database describes it: tables and their indexes, and triggers with how they were made. */
async function schemaOf(db: Knex, dialect: Dialect): Promise<unknown> {
  if (dialect === "sqlite") {
    return db.raw("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name");
  }
  const [tables] = (await db.raw(
    "SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME",
  )) as [Array<{ name: string }>];
  const created: string[] = [];
  for (const { name } of tables) {
    const [[row]] = (await db.raw(`SHOW CREATE TABLE \`${name}\``)) as [Array<Record<string, string>>];
    // The next AUTO_INCREMENT value moves with the rows; it is not schema.
    created.push(String(row?.["Create Table"]).replace(/ AUTO_INCREMENT=\d+/, ""));
  }
  const [triggers] = (await db.raw(
    "SELECT TRIGGER_NAME, EVENT_MANIPULATION, EVENT_OBJECT_TABLE, ACTION_ORDER, ACTION_TIMING, ACTION_STATEMENT, " +
      "SQL_MODE, DEFINER, CHARACTER_SET_CLIENT, COLLATION_CONNECTION, DATABASE_COLLATION " +
      "FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() ORDER BY TRIGGER_NAME",
  )) as [unknown[]];
  return { created, triggers };
}

/** Where the counters differ from the rows they count, one line each; none when they are exact. */
async function counterMismatches(db: Knex): Promise<string[]> {
  const mismatches: string[] = [];
  const compare = async (what: string, table: string, counters: string, columns: readonly string[]) => {
    const want = await groupCounts(db, table, columns);
    const have = await groupCounts(db, counters, columns, { counters: true });
    for (const k of new Set([...Object.keys(want), ...Object.keys(have)]))
      if ((want[k] ?? 0) !== (have[k] ?? 0))
        mismatches.push(`${what} ${k.replaceAll("\u0000", "/")}: COUNT(*) ${want[k] ?? 0}, counter ${have[k] ?? 0}`);
  };
  await compare("term", "definition_terms", "definition_term_counts", [
    "tenant",
    "kind",
    "value",
    "status",
    "is_latest",
  ]);
  await compare("definition", "agent_definitions", "definition_counts", ["tenant", "status", "is_latest"]);
  return mismatches;
}

const listParts = listRequestParts({ limit: 5 });

describe.each([
  { name: "sqlite", skip: false },
  { name: "mariadb", skip: inject("mysqlUrl") === null },
] as const)("seeding the bench's own database on $name", ({ name, skip }) => {
  const mysqlUrl = inject("mysqlUrl") ?? undefined;
  const dialect: Dialect = name === "sqlite" ? "sqlite" : "mysql";
  let dataDir = "";
  let databaseUrl: string | undefined;
  let drop: () => Promise<void> = async () => undefined;
  let db: Knex | undefined;
  let migrated: unknown;
  let sample: { readonly id: string; readonly json: unknown } | undefined;

  beforeAll(async () => {
    if (skip) return;
    dataDir = await mkdtemp(join(tmpdir(), "asor-bench-"));
    const database = await createBenchDatabase({
      serverUrl: name === "sqlite" ? undefined : mysqlUrl,
      name: `asor_bench_test_${randomBytes(4).toString("hex")}`,
      dataDir,
      tenant: TENANT,
      sequencePrefix: "BENCH-",
    });
    databaseUrl = database.databaseUrl;
    drop = () => database.drop();
    db = (await openDatabase({ databaseUrl, dataDir })).db;
    migrated = await schemaOf(db, dialect);
    const seeder = await openSeeder({ databaseUrl, dataDir, tenant: TENANT });
    try {
      expect(await seeder.topUp(FIRST)).toBe(FIRST);
      expect(await seeder.topUp(SIZE)).toBe(SIZE - FIRST);
      sample = seeder.expected();
    } finally {
      await seeder.close();
    }
  }, 240_000);

  afterAll(async () => {
    await db?.destroy();
    await drop();
    if (dataDir !== "") await rm(dataDir, { recursive: true, force: true });
  });

  it.skipIf(skip)("leaves the schema as the migrations made it, its term counters' trigger back in place", async () => {
    if (db === undefined) throw new Error("not seeded");
    const after = await schemaOf(db, dialect);
    expect(after).toEqual(migrated);
    expect(JSON.stringify(after)).toContain(TERM_COUNT_TRIGGER);
  });

  it.skipIf(skip)("leaves every counter equal to the COUNT(*) of what it counts", async () => {
    if (db === undefined) throw new Error("not seeded");
    const [{ n } = { n: 0 }] = (await db("definition_terms").count({ n: "*" })) as Array<{ n: number | string }>;
    expect(Number(n)).toBeGreaterThan(SIZE);
    expect(await counterMismatches(db)).toEqual([]);
  });

  it.skipIf(skip)("answers exact totals, and the service's writes after it still move the counters", async () => {
    if (db === undefined) throw new Error("not seeded");
    const repository = await createSqlRepository({ databaseUrl, dataDir });
    try {
      const all = parseListQuery(TENANT, listParts);
      const tagged = parseListQuery(TENANT, { ...listParts, tag: [ONE_PERCENT_TAG] });
      expect((await repository.search(TENANT, all)).total).toBe(SIZE);
      expect((await repository.search(TENANT, tagged)).total).toBe(onePercentOf(SIZE));
      // A seeded row reads back as the document the seeding made by the storage's own encoding.
      if (sample === undefined) throw new Error("the seeder kept no sample");
      const stored = await repository.get(TENANT, sample.id);
      expect(JSON.parse(new TextDecoder().decode(stored?.json))).toEqual(sample.json);

      const written = definition({ name: "Written After Seeding" });
      written.skills[0]?.tags.push(create(SkillTagSchema, { tag: ONE_PERCENT_TAG }));
      await save(repository, written, TENANT);
      expect((await repository.search(TENANT, all)).total).toBe(SIZE + 1);
      expect((await repository.search(TENANT, tagged)).total).toBe(onePercentOf(SIZE) + 1);
      expect(await counterMismatches(db)).toEqual([]);
    } finally {
      await repository.close();
    }
  });
  it.skipIf(skip)(
    "moves the tenant's revision and its counters' versions, so a running service counts its kept totals again",
    async () => {
      if (db === undefined) throw new Error("not seeded");
      const repository = await createSqlRepository({ databaseUrl, dataDir });
      // Two words: a counted total, which the repository keeps by its words' counter versions (counted-totals.ts).
      const bothWords = parseListQuery(TENANT, { ...listParts, q: `${ONE_PERCENT_WORD} ${ONE_PERCENT_SECOND_WORD}` });
      // The oracle: the definitions holding both words, counted in SQL apart from the search.
      const holdingBoth = async (knex: Knex) => {
        const [row] = (await knex
          .raw(
            `SELECT COUNT(*) AS n FROM definition_terms a JOIN definition_terms b ON b.seq = a.seq
         WHERE a.tenant = ? AND a.kind = 10 AND a.value = ? AND b.kind = 10 AND b.value = ?
         AND a.status IN ('ACTIVE', 'DEPRECATED')`,
            [TENANT, ONE_PERCENT_WORD, ONE_PERCENT_SECOND_WORD],
          )
          .then((result: unknown) => (dialect === "mysql" ? (result as unknown[][])[0] : result))) as Array<{
          n: number | string;
        }>;
        return Number(row?.n);
      };
      const seeder = await openSeeder({ databaseUrl, dataDir, tenant: TENANT });
      try {
        // A write through the repository first: the tenant has a revision to keep totals at.
        await save(repository, definition({ name: "Written Before Seeding More" }), TENANT);
        const before = (await repository.search(TENANT, bothWords)).total;
        expect(before).toBe(await holdingBoth(db));
        expect((await repository.search(TENANT, bothWords)).total).toBe(before);
        expect(await seeder.topUp((await seeder.count()) + 300)).toBe(300);
        const after = await holdingBoth(db);
        expect(after).toBeGreaterThan(before);
        expect((await repository.search(TENANT, bothWords)).total).toBe(after);
      } finally {
        await seeder.close();
        await repository.close();
      }
    },
  );

  it.skipIf(skip)(
    "makes again what a seeding that died left suspended, at the next top-up even when it adds nothing",
    async () => {
      if (db === undefined) throw new Error("not seeded");
      // A seeding that died after dropping the trigger (and on SQLite the lookup index), before making them again.
      await suspendForBulkLoad(db, dialect, { databaseUrl, dataDir });
      const suspended = JSON.stringify(await schemaOf(db, dialect));
      // The index is built after the rows on SQLite only (bulk-load.ts, buildsIndexAfter).
      expect(suspended.includes(TERM_LOOKUP_INDEX)).toBe(dialect === "mysql");
      expect(suspended).not.toContain(TERM_COUNT_TRIGGER);
      expect(suspended).toContain(SUSPENDED_TABLE);
      const seeder = await openSeeder({ databaseUrl, dataDir, tenant: TENANT });
      try {
        // The tenant holds SIZE and more already: nothing to add, and still not measured without its index.
        expect(await seeder.topUp(SIZE)).toBe(0);
      } finally {
        await seeder.close();
      }
      expect(await schemaOf(db, dialect)).toEqual(migrated);
      expect(await counterMismatches(db)).toEqual([]);
    },
  );

  it.skipIf(skip)(
    "numbers on from the newest agent after a seeding that died before moving the tenant's next agent number",
    async () => {
      const knex = db;
      if (knex === undefined) throw new Error("not seeded");
      const numbers = async () =>
        (await knex("agents").where({ tenant: TENANT }).max({ newest: "number" }).count({ all: "*" }).first()) as {
          newest: number | string;
          all: number | string;
        };
      const { newest } = await numbers();
      // Batches write their agents; the tenant's number moves once, after the last (bench/seed.ts). A seeding
      // killed in between leaves its triggers suspended and the number behind its committed batches' agents.
      await suspendForBulkLoad(knex, dialect, { databaseUrl, dataDir });
      await knex("tenants")
        .where({ name: TENANT })
        .update({ next_agent_number: Number(newest) - 999 });
      const seeder = await openSeeder({ databaseUrl, dataDir, tenant: TENANT });
      try {
        expect(await seeder.topUp((await seeder.count()) + 1500)).toBe(1500);
      } finally {
        await seeder.close();
      }
      const after = await numbers();
      // Numbered on from the newest: 1..N with no gap and no clash, and the tenant's next number after them.
      expect(Number(after.newest)).toBe(Number(newest) + 1500);
      expect(Number(after.all)).toBe(Number(after.newest));
      const [tenant] = (await knex("tenants").where({ name: TENANT }).select("next_agent_number")) as Array<{
        next_agent_number: number | string;
      }>;
      expect(Number(tenant?.next_agent_number)).toBe(Number(after.newest) + 1);
      expect(await schemaOf(knex, dialect)).toEqual(migrated);
      expect(await counterMismatches(knex)).toEqual([]);
    },
  );
});

forEachDatabase((database) => {
  const target = useFreshDatabase(database);

  it("refuses to seed a database that is not the bench's own, and leaves its trigger", async () => {
    const { databaseUrl, dataDir } = target();
    const repository = await createSqlRepository({ databaseUrl, dataDir });
    await repository.createTenant(TENANT, "BENCH-");
    await repository.close();
    const seeder = await openSeeder({ databaseUrl, dataDir, tenant: TENANT });
    try {
      await expect(seeder.topUp(10)).rejects.toThrow(/Refusing to bulk-load/);
      expect(await seeder.count()).toBe(0);
    } finally {
      await seeder.close();
    }
    const { db, dialect } = await openDatabase({ databaseUrl, dataDir });
    try {
      const triggers =
        dialect === "mysql"
          ? ((await db.raw("SHOW TRIGGERS")) as [Array<{ Trigger: string }>])[0].map((t) => t.Trigger)
          : (
              (await db.raw("SELECT name AS Trigger FROM sqlite_master WHERE type = 'trigger'")) as Array<{
                Trigger: string;
              }>
            ).map((t) => t.Trigger);
      expect(triggers).toContain(TERM_COUNT_TRIGGER);
    } finally {
      await db.destroy();
    }
  });
});

describe("benchDatabaseGuard", () => {
  it("takes only a bench database: asor_bench... on MariaDB, a bench data dir under the temporary directory", () => {
    expect(() => benchDatabaseGuard("mysql://root@127.0.0.1:3306/asor_bench_seed1m", "/x")).not.toThrow();
    expect(() => benchDatabaseGuard("mysql://root@127.0.0.1:3306/registry", "/x")).toThrow(/registry/);
    expect(() => benchDatabaseGuard(undefined, join(tmpdir(), "asor-bench-abc"))).not.toThrow();
    expect(() => benchDatabaseGuard(undefined, "/var/lib/registry")).toThrow(/Refusing/);
    expect(() => benchDatabaseGuard(undefined, join(tmpdir(), "asor-test-abc"))).toThrow(/Refusing/);
    expect(() => benchDatabaseGuard(undefined, join(tmpdir(), "x", "asor-bench-abc"))).toThrow(/Refusing/);
  });
});
