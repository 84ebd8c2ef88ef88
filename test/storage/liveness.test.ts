/**
 * Liveness in storage (issue 44; migration 0021), on the real databases: a version reads NOT_PROBED until a probe
 * publishes its liveness; a change of state or drift is a LIVENESS_CHANGED change record with a tenant revision and
 * the version's modRevision, leaving its row's documents and revision alone; a decision that changes nothing
 * writes nothing; and the schedule leases each due version to one claimer at a time, again once the lease ends.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { NEVER_PROBED, type PublishedLiveness } from "../../src/domain/liveness.js";
import type { AgentDefinitionRepository, StoredDefinition } from "../../src/storage/repository.js";
import type { Database } from "../../src/storage/run/connection.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { definition, save } from "./fixtures.js";

const UP: PublishedLiveness = { state: "UP", drift: "NONE", json: '{"state":"UP","drift":"NONE"}' };
const DOWN: PublishedLiveness = { state: "DOWN", drift: "NONE", json: '{"state":"DOWN","drift":"NONE"}' };

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  let raw: Database;

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    raw = await openDatabase(target());
  });

  afterAll(async () => {
    await repo?.close();
    await raw?.db.destroy();
  });

  const kinds = async (id: string) =>
    ((await raw.db("definition_changes").where({ definition_id: id }).orderBy("revision")) as { kind: string }[]).map(
      (row) => row.kind,
    );
  const publish = (version: StoredDefinition, published: PublishedLiveness | undefined) =>
    repo.write("default", (tx) => tx.setLiveness(version, () => published));

  it("reads NOT_PROBED until a change of state or drift is published, with a revision of its own", async () => {
    const { stored } = await save(repo, definition({ name: "Liveness one" }));
    expect(stored.liveness ?? null).toBeNull();
    const changed = await publish(stored, UP);
    expect(changed?.liveness).toBe(UP.json);
    expect(changed?.modRevision).toBeGreaterThan(stored.modRevision);
    // Its content and its own revision stay: a probe is not an edit.
    expect(changed?.revision).toBe(stored.revision);
    expect(Buffer.compare(Buffer.from(changed!.binary), Buffer.from(stored.binary))).toBe(0);
    const read = await repo.get("default", stored.id);
    expect(read?.liveness).toBe(UP.json);
    expect(read?.modRevision).toBe(changed?.modRevision);
    expect(await kinds(stored.id)).toEqual(["ADDED", "LIVENESS_CHANGED"]);
    // The same state and drift again, or no decision: nothing written, no record, no revision.
    expect(await publish(read!, { ...UP, json: '{"state":"UP","drift":"NONE","latencyMs":3}' })).toBeUndefined();
    expect(await publish(read!, undefined)).toBeUndefined();
    expect(await kinds(stored.id)).toEqual(["ADDED", "LIVENESS_CHANGED"]);
    expect((await repo.get("default", stored.id))?.modRevision).toBe(changed?.modRevision);
    // Down: one more record; the list and the change log read it too.
    const down = await publish(read!, DOWN);
    expect(down?.liveness).toBe(DOWN.json);
    expect(await kinds(stored.id)).toEqual(["ADDED", "LIVENESS_CHANGED", "LIVENESS_CHANGED"]);
    const records = await repo.changeLog().read("default", 0, down!.modRevision, 100);
    expect(records.at(-1)).toMatchObject({ kind: "LIVENESS_CHANGED", revision: down?.modRevision });
    expect(records.at(-1)?.stored.liveness).toBe(DOWN.json);
  });

  it("seeds a due row per ACTIVE version and leases each to one claimer until its lease ends", async () => {
    const schedule = repo.probeSchedule();
    const { stored } = await save(repo, definition({ name: "Liveness scheduled" }));
    const now = new Date();
    expect(await schedule.seed(now, 1_000, 10_000)).toBeGreaterThan(0);
    expect(await schedule.seed(now, 1_000, 10_000)).toBe(0);
    // Due within the second after `now`: none before it, every one by its end.
    const before = await schedule.claim("early", 100, new Date(now.getTime() - 1), now);
    expect(before.map((p) => p.id)).not.toContain(stored.id);
    const later = new Date(now.getTime() + 1_000);
    const first = await schedule.claim("process-a", 100, later, new Date(later.getTime() + 60_000));
    expect(first.map((p) => p.id)).toContain(stored.id);
    expect(first.find((p) => p.id === stored.id)?.now).toEqual(NEVER_PROBED);
    // Leased: another claimer gets none of them until the lease ends.
    const second = await schedule.claim("process-b", 100, later, new Date(later.getTime() + 60_000));
    expect(second.map((p) => p.id)).not.toContain(stored.id);
    const afterLease = new Date(later.getTime() + 60_001);
    const taken = await schedule.claim("process-b", 100, afterLease, new Date(afterLease.getTime() + 60_000));
    expect(taken.map((p) => p.id)).toContain(stored.id);
    // Finished: its failures kept, not due until its next time.
    await schedule.finish("default", stored.id, 1, new Date(afterLease.getTime() + 300_000));
    expect((await schedule.current("default", stored.id)).failures).toBe(1);
    const early = new Date(afterLease.getTime() + 200_000);
    expect((await schedule.claim("c", 100, early, early)).map((p) => p.id)).not.toContain(stored.id);
    const due = new Date(afterLease.getTime() + 300_001);
    expect((await schedule.claim("c", 100, due, due)).map((p) => p.id)).toContain(stored.id);
    // In a batch: the same, for each.
    await schedule.finishAll([{ tenant: "default", id: stored.id, failures: 2, dueAt: new Date(due.getTime() + 1) }]);
    expect((await schedule.current("default", stored.id)).failures).toBe(2);
    expect((await schedule.claim("d", 100, due, due)).map((p) => p.id)).not.toContain(stored.id);
  });
});
