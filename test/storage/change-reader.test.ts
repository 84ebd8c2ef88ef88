/**
 * The change reader (issue 20, items 3-4) on the real databases: one reader hands every watcher the
 * tenant's changes in revision order with no gap and no duplicate, also under concurrent writers; a
 * watcher that does not read is closed at its queue's limit; a start older than the log answers
 * REVISION_COMPACTED; the reader's statements do not grow with its watchers.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RegistryError } from "../../src/domain/errors.js";
import { type ByteGate, createByteGate } from "../../src/storage/byte-gate.js";
import { createChangeLog } from "../../src/storage/change-log.js";
import { type ChangeReader, createChangeReader, type WatchItem } from "../../src/storage/change-reader.js";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import { toDatabaseTimestamp } from "../../src/storage/rows.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { driverRunner } from "../../src/storage/run/reads.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { definition, save } from "./fixtures.js";

/** Byte budgets (issue 50) too large to matter, for the cases about something else. */
const unbounded = () => ({
  queueBytes: 1 << 30,
  batchBytes: 1 << 30,
  replay: createByteGate(1 << 30),
  replayWaitMs: 10_000,
  replayHoldMs: 60_000,
});

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
      pollMs: 20,
      bookmarkMs: 60_000,
      queueLimit: 100,
      batchLimit: 7,
      retention: { count: 0, maxAgeMs: 0 },
      compactMs: 0,
      ...unbounded(),
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
        pollMs: 20,
        bookmarkMs: 60_000,
        queueLimit: 100,
        handedAtOnce: 4,
        retention: { count: 0, maxAgeMs: 0 },
        compactMs: 0,
        ...unbounded(),
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
        pollMs: 20,
        bookmarkMs: 60_000,
        queueLimit: 5,
        retention: { count: 0, maxAgeMs: 0 },
        compactMs: 0,
        ...unbounded(),
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

    /** A reader with byte budgets of its own (issue 50), the rest as the other cases have it. */
    const bounded = (budgets: {
      queueBytes?: number;
      batchBytes?: number;
      replay?: ByteGate;
      replayWaitMs?: number;
      replayHoldMs?: number;
    }) =>
      createChangeReader({
        log: repo.changeLog(),
        pollMs: 20,
        bookmarkMs: 60_000,
        queueLimit: 100,
        retention: { count: 0, maxAgeMs: 0 },
        compactMs: 0,
        ...unbounded(),
        ...budgets,
      });
    /** A tenant of `count` definitions of one size (names of one length), and the bytes each holds as stored. */
    const sameSized = async (count: number, prefix: string) => {
      const tenant = await newTenant();
      const start = await revisionOf(tenant);
      for (let i = 0; i < count; i++) await save(repo, definition({ name: `${prefix}${i}` }), tenant);
      const heads = await repo.changeLog().heads(tenant, start, start + count, count);
      expect(heads.map((head) => head.revision)).toEqual(Array.from({ length: count }, (_, i) => start + 1 + i));
      const bytes = heads[0]!.bytes;
      for (const head of heads) expect(head.bytes).toBe(bytes);
      return { tenant, start, bytes };
    };

    it("hands a watcher at most batchBytes at once, from the log or queued, and a larger change alone", async () => {
      const { tenant, start, bytes } = await sameSized(6, "sized");
      // Room for nearly three: two at a time (a later definition may be a few bytes larger: its agent's number).
      const reader = bounded({ batchBytes: Math.floor(bytes * 2.9) });
      const fromLog = (await reader.watch({ tenant, since: start, accept: () => true }))[Symbol.asyncIterator]();
      const read = await takeBatches(fromLog, 6);
      expect(read.sizes).toEqual([2, 2, 2]);
      expect(read.revisions).toEqual(Array.from({ length: 6 }, (_, i) => start + 1 + i));
      // Queued while the watcher did not ask: handed the same way.
      for (let i = 6; i < 10; i++) await save(repo, definition({ name: `sized${i}` }), tenant);
      // Polls begun after the last write have queued them all.
      const before = reader.stats().polls;
      while (reader.stats().polls < before + 3) await new Promise((r) => setTimeout(r, 10));
      const queued = await takeBatches(fromLog, 4);
      expect(queued.sizes).toEqual([2, 2]);
      await fromLog.return?.(undefined);
      // A budget smaller than one change: each goes alone, none is lost.
      const tiny = bounded({ batchBytes: Math.floor(bytes / 2) });
      const alone = (await tiny.watch({ tenant, since: start, accept: () => true }))[Symbol.asyncIterator]();
      expect((await takeBatches(alone, 3)).sizes).toEqual([1, 1, 1]);
      await alone.return?.(undefined);
      await Promise.all([reader.close(), tiny.close()]);
    });

    it("closes a watcher whose queued bytes pass queueBytes, below its count limit, with WATCH_TOO_SLOW", async () => {
      const { tenant, bytes } = await sameSized(1, "heavy");
      const reader = bounded({ queueBytes: Math.floor(bytes * 2.5) });
      const items = (await reader.watch({ tenant, accept: () => true }))[Symbol.asyncIterator]();
      for (let i = 0; i < 4; i++) await save(repo, definition({ name: `heavy${i + 10}` }), tenant);
      const deadline = Date.now() + 10_000;
      while (reader.stats().watchers > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(reader.stats().watchers).toBe(0);
      await expect(items.next()).rejects.toMatchObject({
        code: "WATCH_TOO_SLOW",
        message: expect.stringContaining(`${Math.floor(bytes * 2.5)} bytes`),
      });
      await reader.close();
    });

    it("reads every start under one budget: a start waits its turn, or is refused after too long", async () => {
      const { tenant, start, bytes } = await sameSized(3, "turn");
      const replay = createByteGate(bytes);
      const reader = bounded({ batchBytes: bytes, replay, replayWaitMs: 300 });
      // The first start holds the budget with its first read, until it asks for more.
      const first = (await reader.watch({ tenant, since: start, accept: () => true }))[Symbol.asyncIterator]();
      expect(replay.used).toBe(bytes);
      await expect(reader.watch({ tenant, since: start, accept: () => true })).rejects.toMatchObject({
        code: "WATCH_REPLAY_BUSY",
      });
      expect(replay.refused).toBe(1);
      // Handed its last read, the first still holds it (not yet written); a start meanwhile waits its turn.
      expect((await takeBatches(first, 3)).sizes).toEqual([1, 1, 1]);
      expect(replay.used).toBe(bytes);
      const second = reader.watch({ tenant, since: start, accept: () => true });
      await new Promise((r) => setTimeout(r, 20));
      expect(replay.waiting).toBe(1);
      // The first asks for more (it is through the log, and waits for live changes): the second's turn.
      const live = first.next();
      const secondItems = (await second)[Symbol.asyncIterator]();
      expect((await takeBatches(secondItems, 3)).revisions).toEqual([start + 1, start + 2, start + 3]);
      await secondItems.return?.(undefined);
      expect(replay.used).toBe(0);
      // The first's next item is pending: closing the reader ends it.
      await reader.close();
      expect(await live).toEqual({ done: true, value: undefined });
    });

    it("gives a start's share back when its client leaves, read or not, waiting or holding", async () => {
      const { tenant, start, bytes } = await sameSized(2, "gone");
      const replay = createByteGate(bytes);
      const reader = bounded({ batchBytes: bytes, replay, replayWaitMs: 5_000 });
      const holding = new AbortController();
      await reader.watch({ tenant, since: start, accept: () => true, signal: holding.signal });
      expect(replay.used).toBe(bytes);
      const waiting = new AbortController();
      const waited = reader.watch({ tenant, since: start, accept: () => true, signal: waiting.signal });
      await new Promise((r) => setTimeout(r, 20));
      expect(replay.waiting).toBe(1);
      waiting.abort(new Error("client gone"));
      await expect(waited).rejects.toThrow("client gone");
      expect(replay.waiting).toBe(0);
      // The holder's stream was never read: its client leaving frees the budget all the same.
      holding.abort();
      expect(replay.used).toBe(0);
      await reader.close();
    });

    it("closes a start that leaves its part unread past replayHoldMs, and gives its share on", async () => {
      const { tenant, start, bytes } = await sameSized(2, "held");
      const replay = createByteGate(bytes);
      const reader = bounded({ batchBytes: bytes, replay, replayWaitMs: 5_000, replayHoldMs: 200 });
      const stuck = (await reader.watch({ tenant, since: start, accept: () => true }))[Symbol.asyncIterator]();
      expect((await stuck.next()).value?.map((item: WatchItem) => item.revision)).toEqual([start + 1]);
      // Its client takes nothing more; the next start waits, then has the budget once the first is closed.
      const next = await reader.watch({ tenant, since: start, accept: () => true });
      expect(replay.used).toBe(bytes);
      await expect(stuck.next()).rejects.toMatchObject({
        code: "WATCH_TOO_SLOW",
        message: expect.stringContaining(`revision ${start} had been sent`),
      });
      const items = next[Symbol.asyncIterator]();
      expect((await takeBatches(items, 2)).revisions).toEqual([start + 1, start + 2]);
      await items.return?.(undefined);
      await reader.close();
    });

    it("reads a record once for watchers replaying it together, and hands each the same record", async () => {
      const { tenant, start, bytes } = await sameSized(4, "shared");
      const reader = bounded({ batchBytes: bytes });
      const first = (await reader.watch({ tenant, since: start, accept: () => true }))[Symbol.asyncIterator]();
      const second = (await reader.watch({ tenant, since: start, accept: () => true }))[Symbol.asyncIterator]();
      const readsBefore = reader.stats().reads;
      // In step: the first holds each record it was handed while the second asks for it.
      for (let i = 0; i < 4; i++) {
        const [a, b] = [(await first.next()).value?.[0], (await second.next()).value?.[0]];
        if (a?.type !== "change" || b?.type !== "change") throw new Error(`no change handed at ${i}`);
        expect(a.revision).toBe(start + 1 + i);
        expect(b.stored).toBe(a.stored);
      }
      expect(reader.stats().reads - readsBefore).toBe(4);
      await first.return?.(undefined);
      await second.return?.(undefined);
      await reader.close();
    });

    it("answers REVISION_COMPACTED for a start the log no longer holds, and keeps the tail", async () => {
      const tenant = await newTenant();
      for (let i = 0; i < 6; i++) await save(repo, definition({ name: `c${i}` }), tenant);
      const removed = await repo.changeLog().compact({ count: 2, maxAgeMs: 0 }, new Date());
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
      await repo.changeLog().compact({ count: 0, maxAgeMs: 1_000 }, later);
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
        expect(await log.compact({ count: 0, maxAgeMs: 3_600_000 }, new Date())).toBe(3);
        // 4 is within the hour: it stays, and 5 behind it with it.
        expect(await log.oldest(tenant)).toBe(4);
        await age([4]);
        expect(await log.compact({ count: 0, maxAgeMs: 3_600_000 }, new Date())).toBe(2);
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
        expect(await log.compact({ count: 2, maxAgeMs: 0 }, new Date())).toBeGreaterThanOrEqual(5);
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
        pollMs: 20,
        bookmarkMs: 60_000,
        queueLimit: 5,
        retention: { count: 0, maxAgeMs: 0 },
        compactMs: 0,
        ...unbounded(),
      });
      const tenant = await newTenant();
      const items = oneByOne(await own.watch({ tenant, accept: () => true }));
      const ended = items.next();
      await own.close();
      expect(await ended).toEqual({ done: true, value: undefined });
    });
  });
});
