/**
 * The hot reads by key asked at once (by id, by `Agent_ID=` reference): on MySQL coalesced into one statement
 * per tenant (run/reads.ts coalescedReads), on SQLite one statement each. Whatever runs them, each read
 * answers what it answers alone.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RegistryError } from "../../src/domain/errors.js";
import { readById, readNewestByReference, readStatements } from "../../src/storage/queries/reads.js";
import type { AgentDefinitionRepository, Found, StoredDefinition } from "../../src/storage/repository.js";
import { type Database, openDatabase } from "../../src/storage/run/connection.js";
import { coalescedReads, driverRunner } from "../../src/storage/run/reads.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, testDatabases, useFreshDatabase } from "../support/databases.js";
import { definition, newId, save } from "./fixtures.js";

type Read = (tenant: string, key: string) => Promise<Found>;

/** A read's outcome, comparable: the definition's bytes and the revision read at, or the error's code. */
async function outcome(read: Read, tenant: string, key: string) {
  try {
    const { stored, revision } = await read(tenant, key);
    return { revision, stored: stored === undefined ? undefined : comparable(stored) };
  } catch (error) {
    if (error instanceof RegistryError) return { error: error.code };
    throw error;
  }
}

function comparable(stored: StoredDefinition) {
  return { ...stored, json: Buffer.from(stored.json).toString(), binary: Buffer.from(stored.binary).toString("hex") };
}

/** Each of `asked` read one at a time, then all at once: the two lists of outcomes. */
async function aloneAndTogether(read: Read, asked: readonly (readonly [string, string])[]) {
  const alone = [];
  for (const [tenant, key] of asked) alone.push(await outcome(read, tenant, key));
  const together = await Promise.all(asked.map(([tenant, key]) => outcome(read, tenant, key)));
  return { alone, together };
}

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  /** The ids and reference ids of the definitions in "default" and in "other". */
  const ids = { default: [] as string[], other: [] as string[] };
  const refs = { default: [] as string[], other: [] as string[], odd: "" };

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    await repo.createTenant("other", "OTHER-");
    await repo.createTenant("empty", "EMPTY-");
    // A prefix with U+FFFD, which the drivers also send for a lone surrogate.
    await repo.createTenant("odd", "R\uFFFD-");
    refs.odd = (await save(repo, definition(), "odd")).stored.agent.referenceId;
    for (const tenant of ["default", "other"] as const) {
      for (let i = 0; i < 5; i++) {
        const saved = await save(repo, definition({ name: `Agent ${i}`, version: `1.${i}.0` }), tenant);
        ids[tenant].push(saved.stored.id);
        refs[tenant].push(saved.stored.agent.referenceId);
      }
    }
  });

  afterAll(async () => {
    await repo?.close();
  });

  it("answers each of many gets by id asked at once what it answers alone", async () => {
    const asked = [
      ...ids.default.map((id) => ["default", id] as const),
      ...ids.other.map((id) => ["other", id] as const),
      ["default", ids.default[0]!], // asked twice at once
      ["default", ids.other[0]!], // another tenant's definition
      ["default", newId()], // no such definition
      ["default", "not-an-id"], // an id the registry could not have issued
      ["empty", ids.default[1]!], // a tenant with no definitions
      ["empty", newId()],
      ["nowhere", ids.default[2]!], // no such tenant
      ["nowhere", newId()],
    ] as const;
    const { alone, together } = await aloneAndTogether((tenant, id) => repo.find(tenant, id), asked);
    expect(together).toEqual(alone);
    // The answers differ from one another as they should.
    expect(alone.filter((a) => a.stored !== undefined)).toHaveLength(11);
    expect(alone.filter((a) => a.error === "TENANT_NOT_FOUND")).toHaveLength(2);
    expect(alone.filter((a) => "revision" in a && a.stored === undefined)).toHaveLength(5);
  });

  it("answers each of many gets by reference asked at once what it answers alone", async () => {
    const [first] = refs.default;
    const asked = [
      ...refs.default.map((ref) => ["default", ref] as const),
      ...refs.other.map((ref) => ["other", ref] as const),
      ["default", first!], // asked twice at once
      ["default", refs.other[0]!], // another tenant's agent
      ["default", `${first} `], // a trailing space: the column's collation pads none
      ["default", first!.toLowerCase()], // nor folds case
      ["default", `${first}\uD800`], // a lone surrogate
      ["odd", refs.odd], // found as it is stored
      ["odd", refs.odd.replace("\uFFFD", "\uD800")], // and with a lone surrogate in its place, as the driver sends it
      ["default", "Agent_ID=DEFAULT-999"], // no such agent
      ["empty", first!],
      ["nowhere", first!],
    ] as const;
    const { alone, together } = await aloneAndTogether((t, ref) => repo.findNewestByReference(t, ref), asked);
    expect(together).toEqual(alone);
    expect(alone.filter((a) => a.stored !== undefined).length).toBeGreaterThanOrEqual(12);
    expect(alone.filter((a) => a.error === "TENANT_NOT_FOUND")).toHaveLength(1);
    // The lone surrogate in place of U+FFFD is found or not as the driver sends it (both ways, the same).
    expect(alone.filter((a) => "revision" in a && a.stored === undefined).length).toBeGreaterThanOrEqual(6);
  });
});

const mariadb = testDatabases().find((db) => db.name === "mariadb");
describe.skipIf(mariadb === undefined || mariadb.skip)("hot reads coalesced, on mariadb", () => {
  const target = useFreshDatabase(mariadb!);
  let repo: AgentDefinitionRepository;
  let database: Database;
  const ids: string[] = [];
  const refs: string[] = [];
  const statements = readStatements("mysql");

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    await repo.createTenant("other", "OTHER-");
    for (let i = 0; i < 8; i++) {
      const { stored } = await save(repo, definition({ name: `Agent ${i}` }));
      ids.push(stored.id);
      refs.push(stored.agent.referenceId);
    }
    database = await openDatabase(target());
  });

  afterAll(async () => {
    await repo?.close();
    await database?.db.destroy();
  });

  it("reads the keys asked while a read is in flight with one statement per tenant, at most maxKeys each", async () => {
    const run = driverRunner(database.db, "mysql");
    const byId = coalescedReads(run, statements.byId, 3);
    const byReference = coalescedReads(run, statements.newestByReference, 3);
    const asked = [...ids.map((id) => ["default", id] as const), ["other", ids[0]!] as const];
    const [rows, newest] = await Promise.all([
      Promise.all(asked.map(([tenant, id]) => byId.read(tenant, id))),
      Promise.all(refs.map((ref) => byReference.read("default", ref))),
    ]);
    // default: the first alone (nothing was in flight), the other 7 in statements of 3, 3 and 1; other: 1.
    expect(byId.stats()).toEqual({ reads: 9, statements: 5 });
    expect(byReference.stats()).toEqual({ reads: 8, statements: 4 });
    const alone = [];
    for (const [tenant, id] of asked) alone.push(await readById({ run, statements }, tenant, id));
    expect(rows).toEqual(alone);
    expect(rows.map((r) => r[0]?.id)).toEqual([...ids, null]);
    const newestAlone = [];
    for (const ref of refs) newestAlone.push(await readNewestByReference({ run, statements }, "default", ref));
    expect(newest).toEqual(newestAlone);
    expect(newest.map((r) => r[0]?.id)).toEqual(ids);
  });

  it("reads keys asked in different turns with a statement each", async () => {
    const reads = coalescedReads(driverRunner(database.db, "mysql"), statements.byId);
    for (const id of ids.slice(0, 3)) expect((await reads.read("default", id))[0]?.id).toBe(id);
    expect(reads.stats()).toEqual({ reads: 3, statements: 3 });
  });

  it("fails every read of a statement that fails", async () => {
    const closed = await openDatabase(target());
    await closed.db.destroy();
    const reads = coalescedReads(driverRunner(closed.db, "mysql"), statements.byId);
    const outcomes = await Promise.allSettled(ids.slice(0, 4).map((id) => reads.read("default", id)));
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected", "rejected", "rejected"]);
    // The first alone, the three asked while it was in flight together.
    expect(reads.stats()).toEqual({ reads: 4, statements: 2 });
  });
});
