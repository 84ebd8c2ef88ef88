/**
 * The change reader (issue 20, items 3-4) on the real databases: one reader hands every watcher the
 * tenant's changes in revision order with no gap and no duplicate, also under concurrent writers; a
 * watcher that does not read is closed at its queue's limit; a start older than the log answers
 * REVISION_COMPACTED; the reader's statements do not grow with its watchers.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RegistryError } from "../../src/domain/errors.js";
import { createChangeLog } from "../../src/storage/change-log.js";
import { type ChangeReader, createChangeReader, type WatchItem } from "../../src/storage/change-reader.js";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import { toDatabaseTimestamp } from "../../src/storage/rows.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { driverRunner } from "../../src/storage/run/reads.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { definition, save } from "./fixtures.js";

/** The reader's batches one item at a time. */
function oneByOne(batches: AsyncIterable<readonly WatchItem[]>): AsyncIterator<WatchItem> {
  return (async function* items(): AsyncGenerator<WatchItem> {
    for await (const batch of batches) yield* batch;
  })();
}

/** Takes batches until they hold `count` items: each batch's size, and the items' revisions in order. */
async function takeBatches(
  batches: AsyncIterator<readonly WatchItem[]>,
  count: number,
): Promise<{ sizes: number[]; revisions: number[] }> {
  const sizes: number[] = [];
  const revisions: number[] = [];
  while (revisions.length < count) {
    const next = await batches.next();
    if (next.done === true) throw new Error(`the items ended after ${revisions.length}`);
    sizes.push(next.value.length);
    revisions.push(...next.value.map((item) => item.revision));
  }
  return { sizes, revisions };
}

/** Takes `count` change items from `items` (bookmarks skipped), failing after `ms`. */
async function take(items: AsyncIterator<WatchItem>, count: number, ms = 10_000): Promise<WatchItem[]> {
  const taken: WatchItem[] = [];
  const deadline = Date.now() + ms;
  while (taken.length < count) {
    const next = await Promise.race([
      items.next(),
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`${taken.length} of ${count} within ${ms} ms`)), deadline - Date.now()),
      ),
    ]);
    if (next.done === true) throw new Error(`the items ended after ${taken.length} of ${count}`);
    if (next.value.type === "change") taken.push(next.value);
  }
  return taken;
}

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  let reader: ChangeReader;
  let tenants = 0;

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    reader = createChangeReader({
      log: repo.changeLog(),
      pollMillis: 20,
      bookmarkMillis: 60_000,
      queueLimit: 100,
      batchLimit: 7,
      retention: { count: 0, maxAgeMillis: 0 },
      compactMillis: 0,
    });
  });
  afterAll(async () => {
    await reader?.close();
    await repo?.close();
  });

  const newTenant = async () => (await repo.createTenant(`reader${++tenants}`, "R-")).name;
  const revisionOf = async (tenant: string) => (await repo.changeLog().revisions([tenant])).get(tenant) ?? 0;

  describe("the change reader", () => {
    it("hands concurrent writers' changes to every watcher in revision order, gap-free, each once", async () => {
      const tenant = await newTenant();
      const start = await revisionOf(tenant);
      const watchers = await Promise.all(
        [0, 1, 2].map(async () => oneByOne(await reader.watch({ tenant, since: start, accept: () => true }))),
      );
      const readsBefore = reader.stats().reads;
      // 4 writers, 8 writes each (creates and updates of the same keys), racing; batches of 7 cut them.
      const writes = 32;
      const taking = watchers.map((w) => take(w, writes, 30_000));
      await Promise.all(
        [0, 1, 2, 3].map(async (writer) => {
          for (let i = 0; i < 8; i++)
            await save(repo, definition({ name: `w${writer}-${i % 3}`, description: `pass ${i}` }), tenant);
        }),
      );
      const seen = await Promise.all(taking);
      const expected = Array.from({ length: writes }, (_, i) => start + 1 + i);
      for (const items of seen) expect(items.map((item) => item.revision)).toEqual(expected);
      // The log was read once for all three watchers: no more statements than batches of the changes.
      expect(reader.stats().reads - readsBefore).toBeLessThanOrEqual(writes);
      for (const w of watchers) await w.return?.(undefined);
    });

    it("starts from a revision in the log: what follows it, then the live changes, none twice", async () => {
      const tenant = await newTenant();
      for (let i = 0; i < 10; i++) await save(repo, definition({ name: `before${i}` }), tenant);
      const items = oneByOne(await reader.watch({ tenant, since: 3, accept: () => true }));
      for (let i = 0; i < 3; i++) await save(repo, definition({ name: `after${i}` }), tenant);
      const seen = await take(items, 10);
      expect(seen.map((item) => item.revision)).toEqual([4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
      await items.return?.(undefined);
    });

    it("hands a watcher at most handedAtOnce changes at once, queued or read from the log, then the rest", async () => {
      const tenant = await newTenant();
      const start = await revisionOf(tenant);
      const small = createChangeReader({
        log: repo.changeLog(),
        pollMillis: 20,
        bookmarkMillis: 60_000,
        queueLimit: 100,
        handedAtOnce: 4,
        retention: { count: 0, maxAgeMillis: 0 },
        compactMillis: 0,
      });
      const batches = (await small.watch({ tenant, accept: () => true }))[Symbol.asyncIterator]();
      for (let i = 0; i < 10; i++) await save(repo, definition({ name: `queued${i}` }), tenant);
      // Every change queued before the watcher asks: polls after the last write have handed them all.
      const polls = small.stats().polls;
      while (small.stats().polls < polls + 3) await new Promise((r) => setTimeout(r, 10));
      const { sizes, revisions } = await takeBatches(batches, 10);
      expect(sizes).toEqual([4, 4, 2]);
      expect(revisions).toEqual(Array.from({ length: 10 }, (_, i) => start + 1 + i));
      await batches.return?.(undefined);
      // A watcher that starts from the log reads its own records, and is handed them the same way.
      const fromLog = (await small.watch({ tenant, since: start, accept: () => true }))[Symbol.asyncIterator]();
      const fromLogTaken = await takeBatches(fromLog, 10);
      expect(fromLogTaken.sizes).toEqual([4, 4, 2]);
      expect(fromLogTaken.revisions).toEqual(revisions);
      await fromLog.return?.(undefined);
      await small.close();
    });

    it("closes a watcher that does not read once its queue is full, with WATCH_TOO_SLOW", async () => {
      const tenant = await newTenant();
      const small = createChangeReader({
        log: repo.changeLog(),
        pollMillis: 20,
        bookmarkMillis: 60_000,
        queueLimit: 5,
        retention: { count: 0, maxAgeMillis: 0 },
        compactMillis: 0,
      });
      const items = oneByOne(await small.watch({ tenant, accept: () => true }));
      for (let i = 0; i < 8; i++) await save(repo, definition({ name: `slow${i}` }), tenant);
      // Once the reader has handed it more than its limit (5), it is closed and no longer counted.
      const deadline = Date.now() + 10_000;
      while (small.stats().watchers > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(small.stats().watchers).toBe(0);
      await small.close();
      const error = await (async () => {
        try {
          for (let next = await items.next(); next.done !== true; next = await items.next());
        } catch (err) {
          return err;
        }
        return undefined;
      })();
      expect(error).toBeInstanceOf(RegistryError);
      expect((error as RegistryError).code).toBe("WATCH_TOO_SLOW");
    });

    it("answers REVISION_COMPACTED for a start the log no longer holds, and keeps the tail", async () => {
      const tenant = await newTenant();
      for (let i = 0; i < 6; i++) await save(repo, definition({ name: `c${i}` }), tenant);
      const removed = await repo.changeLog().compact({ count: 2, maxAgeMillis: 0 }, new Date());
      expect(removed).toBeGreaterThanOrEqual(4);
      expect(await repo.changeLog().oldest(tenant)).toBe(5);
      await expect(reader.watch({ tenant, since: 3, accept: () => true })).rejects.toMatchObject({
        code: "REVISION_COMPACTED",
        message: expect.stringContaining("oldest revision held: 5"),
      });
      // From the oldest held minus one: everything kept.
      const items = oneByOne(await reader.watch({ tenant, since: 4, accept: () => true }));
      expect((await take(items, 2)).map((item) => item.revision)).toEqual([5, 6]);
      await items.return?.(undefined);
      // By age: records written before the cut go, as one tail of the log.
      const later = new Date(Date.now() + 60_000);
      await repo.changeLog().compact({ count: 0, maxAgeMillis: 1_000 }, later);
      expect(await repo.changeLog().oldest(tenant)).toBeUndefined();
    });

    it("compacts by age up to the tenant's first record written since the cut, never past it", async () => {
      const tenant = await newTenant();
      for (let i = 0; i < 6; i++) await save(repo, definition({ name: `a${i}` }), tenant);
      const direct = await openDatabase(target());
      // Records 1-3 and 5 written two hours ago, 4 and 6 now (a record's time is when its write began, so
      // times need not follow revisions).
      const age = (revisions: number[]) =>
        direct
          .db("definition_changes")
          .where({ tenant })
          .whereIn("revision", revisions)
          .update({ changed_at: toDatabaseTimestamp(new Date(Date.now() - 2 * 3_600_000)) });
      try {
        await age([1, 2, 3, 5]);
        const log = repo.changeLog();
        expect(await log.compact({ count: 0, maxAgeMillis: 3_600_000 }, new Date())).toBe(3);
        // 4 is within the hour: it stays, and 5 behind it with it.
        expect(await log.oldest(tenant)).toBe(4);
        await age([4]);
        expect(await log.compact({ count: 0, maxAgeMillis: 3_600_000 }, new Date())).toBe(2);
        expect(await log.oldest(tenant)).toBe(6);
      } finally {
        await direct.db.destroy();
      }
    });

    it("compacts a long tail in batches, oldest first, and keeps what the retention holds", async () => {
      const tenant = await newTenant();
      for (let i = 0; i < 7; i++) await save(repo, definition({ name: `b${i}` }), tenant);
      const direct = await openDatabase(target());
      try {
        // Two revisions per DELETE: the 5 records below the kept 2 go in three statements.
        const log = createChangeLog(direct.db, direct.dialect, driverRunner(direct.db, direct.dialect), { batch: 2 });
        expect(await log.compact({ count: 2, maxAgeMillis: 0 }, new Date())).toBeGreaterThanOrEqual(5);
        expect(await log.oldest(tenant)).toBe(6);
        expect((await log.read(tenant, 0, 7, 10)).map((record) => record.revision)).toEqual([6, 7]);
      } finally {
        await direct.db.destroy();
      }
    });

    it("refuses a start ahead of the tenant's revision", async () => {
      const tenant = await newTenant();
      await expect(reader.watch({ tenant, since: 99, accept: () => true })).rejects.toMatchObject({
        code: "VALIDATION_FAILED",
      });
    });

    it("ends every watch cleanly when it closes", async () => {
      const own = createChangeReader({
        log: repo.changeLog(),
        pollMillis: 20,
        bookmarkMillis: 60_000,
        queueLimit: 5,
        retention: { count: 0, maxAgeMillis: 0 },
        compactMillis: 0,
      });
      const tenant = await newTenant();
      const items = oneByOne(await own.watch({ tenant, accept: () => true }));
      const ended = items.next();
      await own.close();
      expect(await ended).toEqual({ done: true, value: undefined });
    });
  });
});
