/**
 * Reads by id asked in the same turn of the event loop: on MySQL coalesced into one statement per tenant
 * (run/reads.ts coalescedReadsById), on SQLite one statement each. Whatever runs them, each read answers
 * what it answers alone.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RegistryError } from "../../src/domain/errors.js";
import { readById, readStatements } from "../../src/storage/queries/reads.js";
import type { AgentDefinitionRepository, StoredDefinition } from "../../src/storage/repository.js";
import { type Database, openDatabase } from "../../src/storage/run/connection.js";
import { coalescedReadsById, driverRunner } from "../../src/storage/run/reads.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, testDatabases, useFreshDatabase } from "../support/databases.js";
import { definition, newId, save } from "./fixtures.js";

/** A get's outcome, comparable: the definition's bytes and the revision read at, or the error's code. */
async function outcome(repo: AgentDefinitionRepository, tenant: string, id: string) {
  try {
    const { stored, revision } = await repo.find(tenant, id);
    return { revision, stored: stored === undefined ? undefined : comparable(stored) };
  } catch (error) {
    if (error instanceof RegistryError) return { error: error.code };
    throw error;
  }
}

function comparable(stored: StoredDefinition) {
  return { ...stored, json: Buffer.from(stored.json).toString(), binary: Buffer.from(stored.binary).toString("hex") };
}

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  /** Ids of definitions in "default" and in "other". */
  const ids: { default: string[]; other: string[] } = { default: [], other: [] };

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    await repo.createTenant("other", "OTHER-");
    await repo.createTenant("empty", "EMPTY-");
    for (const tenant of ["default", "other"] as const) {
      for (let i = 0; i < 5; i++) {
        const saved = await save(repo, definition({ name: `Agent ${i}`, version: `1.${i}.0` }), tenant);
        ids[tenant].push(saved.stored.id);
      }
    }
  });

  afterAll(async () => {
    await repo?.close();
  });

  it("answers each of many gets asked at once what it answers alone", async () => {
    const asked: [string, string][] = [
      ...ids.default.map((id): [string, string] => ["default", id]),
      ...ids.other.map((id): [string, string] => ["other", id]),
      ["default", ids.default[0]!], // asked twice in the same turn
      ["default", ids.other[0]!], // another tenant's definition
      ["default", newId()], // no such definition
      ["default", "not-an-id"], // an id the registry could not have issued
      ["empty", ids.default[1]!], // a tenant with no definitions
      ["empty", newId()],
      ["nowhere", ids.default[2]!], // no such tenant
      ["nowhere", newId()],
    ];
    const alone = [];
    for (const [tenant, id] of asked) alone.push(await outcome(repo, tenant, id));
    const together = await Promise.all(asked.map(([tenant, id]) => outcome(repo, tenant, id)));
    expect(together).toEqual(alone);
    // The test can fail: the answers differ from one another as they should.
    expect(alone.filter((a) => a.stored !== undefined)).toHaveLength(11);
    expect(alone.filter((a) => a.error === "TENANT_NOT_FOUND")).toHaveLength(2);
    expect(alone.filter((a) => "revision" in a && a.stored === undefined)).toHaveLength(5);
  });
});

const mariadb = testDatabases().find((db) => db.name === "mariadb");
describe.skipIf(mariadb === undefined || mariadb.skip)("reads by id coalesced, on mariadb", () => {
  const target = useFreshDatabase(mariadb!);
  let repo: AgentDefinitionRepository;
  let database: Database;
  const ids: string[] = [];

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    await repo.createTenant("other", "OTHER-");
    for (let i = 0; i < 8; i++) ids.push((await save(repo, definition({ version: `2.${i}.0` }))).stored.id);
    database = await openDatabase(target());
  });

  afterAll(async () => {
    await repo?.close();
    await database?.db.destroy();
  });

  const statements = readStatements("mysql");

  it("reads the ids asked while a read is in flight with one statement per tenant, at most maxIds ids each", async () => {
    const reads = coalescedReadsById(driverRunner(database.db, "mysql"), statements, 3);
    const asked = [...ids.map((id) => ["default", id] as const), ["other", ids[0]!] as const];
    const rows = await Promise.all(asked.map(([tenant, id]) => reads.read(tenant, id)));
    // default: the first alone (nothing was in flight), the other 7 in statements of 3, 3 and 1; other: 1.
    expect(reads.stats()).toEqual({ reads: 9, statements: 5 });
    const alone = [];
    for (const [tenant, id] of asked)
      alone.push(await readById({ run: driverRunner(database.db, "mysql"), statements }, tenant, id));
    expect(rows).toEqual(alone);
    expect(rows.map((r) => r[0]?.id)).toEqual([...ids, null]);
  });

  it("reads ids asked in different turns with a statement each", async () => {
    const reads = coalescedReadsById(driverRunner(database.db, "mysql"), statements);
    for (const id of ids.slice(0, 3)) expect((await reads.read("default", id))[0]?.id).toBe(id);
    expect(reads.stats()).toEqual({ reads: 3, statements: 3 });
  });

  it("fails every read of a statement that fails, and each alike", async () => {
    const closed = await openDatabase(target());
    await closed.db.destroy();
    const reads = coalescedReadsById(driverRunner(closed.db, "mysql"), statements);
    const outcomes = await Promise.allSettled(ids.slice(0, 4).map((id) => reads.read("default", id)));
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected", "rejected", "rejected"]);
    // The first alone, the three asked while it was in flight together.
    expect(reads.stats()).toEqual({ reads: 4, statements: 2 });
  });
});
