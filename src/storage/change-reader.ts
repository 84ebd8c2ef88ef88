/**
 * The one change reader of a process (issue 20, item 4): it polls the counters of the tenants that have
 * watchers (one statement), reads each moved tenant's new change records once for all its watchers, in
 * revision order, and hands them to each watcher's bounded queue. A watcher that starts from an older
 * revision first reads the log from there (its own statements, once, at its start), then takes the live
 * records from where that read ended. Nothing a reconnecting watcher needs is held only in memory: the
 * log is in the database, so any process answers a resume the same way.
 */
import {
  invalid,
  issueAt,
  type RegistryError,
  revisionCompacted,
  watchReplayBusy,
  watchTooSlow,
} from "../domain/errors.js";
import type { ByteGate, Lease } from "./byte-gate.js";
import type { ChangeHead, ChangeLog, ChangeRecord, Retention } from "./change-log.js";
import { createSharedRecords } from "./shared-records.js";

/** What a watcher receives: a change record, or a bookmark (everything up to `revision` has been handed on). */
export type WatchItem =
  | ({ readonly type: "change" } & ChangeRecord)
  | { readonly type: "bookmark"; readonly revision: number };

export interface ChangeReaderOptions {
  readonly log: ChangeLog;
  /** How often the counters are polled (WATCH_POLL_MS). */
  readonly pollMs: number;
  /** How often each watcher gets a bookmark (WATCH_BOOKMARK_SECONDS). */
  readonly bookmarkMs: number;
  /** How many undelivered items a watcher may hold before it is closed (WATCH_QUEUE_LIMIT). */
  readonly queueLimit: number;
  /**
   * How many bytes of definitions a watcher may leave undelivered (queued, not yet handed on) before it is closed
   * (WATCH_QUEUE_MAX_BYTES); a watcher always gets at least the item it is waiting for.
   */
  readonly queueBytes: number;
  /**
   * The most bytes of definitions a watcher is handed at once and a read of the log holds (WATCH_BATCH_MAX_BYTES); a
   * record larger than this is read and handed on alone.
   */
  readonly batchBytes: number;
  /**
   * What every watcher's own start (its replay of the log from an older revision) holds at once, together
   * (WATCH_REPLAY_MAX_BYTES): each of its reads takes its bytes from here, and gives them back once the watcher asks
   * for more (its surface wrote what it was handed) or ends.
   */
  readonly replay: ByteGate;
  /** How long a watch's start waits for its first read's share of `replay` before it is refused (WATCH_BUSY). */
  readonly replayWaitMs: number;
  /**
   * How long a watcher may hold a read of its own start that it was handed before it asks for more
   * (WATCH_REPLAY_HOLD_MS): one that does not (its client reads nothing) is closed with WATCH_TOO_SLOW, and its
   * share of `replay` goes to the next.
   */
  readonly replayHoldMs: number;
  /** How many change records one statement reads. */
  readonly batchLimit?: number;
  /** The most items a watcher is handed at once, queued or read for its start (default 64). */
  readonly handedAtOnce?: number;
  readonly retention: Retention;
  /** How often the log is compacted (WATCH_COMPACT_SECONDS); 0: never. */
  readonly compactMs: number;
  /** Told of failed polls and compactions; the reader goes on. */
  readonly onError?: (what: string, error: unknown) => void;
}

export interface WatchStart {
  readonly tenant: string;
  /** Start after this revision; undefined: from the revision the reader has reached for the tenant. */
  readonly since?: number | undefined;
  /** Which change records this watcher gets (bookmarks always). */
  readonly accept: (record: ChangeRecord) => boolean;
  /** A bookmark at once, after the records before the start revision. */
  readonly bookmark?: boolean;
  /** Ends the watch (the client left). */
  readonly signal?: AbortSignal | undefined;
}

export interface ChangeReader {
  /**
   * Starts a watch: checks `since` against the log (REVISION_COMPACTED when it is older than the log
   * holds; VALIDATION_FAILED when it is ahead of the tenant) before anything is sent, and answers the items.
   * The items end when the watch is aborted or the reader closes, and fail with WATCH_TOO_SLOW when the
   * watcher falls more than queueLimit items behind. They come in batches, in order: every item ready
   * when the watcher asks for more (a poll's changes, a read of the log), so that a surface can write a
   * batch at once (one socket write per watcher and poll, not per change).
   */
  watch(start: WatchStart): Promise<AsyncIterable<readonly WatchItem[]>>;
  /**
   * How many watchers, over how many tenants, and how many polls and record reads so far (for tests, metrics); each
   * record read follows a read of its records' heads (ChangeLog.heads), not counted.
   */
  stats(): { watchers: number; tenants: number; polls: number; reads: number };
  /** Compacts the log now (also done every compactMs). */
  compact(now?: Date): Promise<number>;
  /** Ends every watch (their streams end cleanly) and stops polling. */
  close(): Promise<void>;
}

const DEFAULT_BATCH = 500;

/**
 * The most items a watcher is handed at once (handedAtOnce), queued or read for its start. What it has been
 * handed waits in its stream's buffer until written (a buffered write per event where a surface writes the
 * events' own bytes), outside queueLimit's count; what it has not waits in its queue, inside it, as items
 * shared with the other watchers. Handed everything at once, a watcher behind held up to queueLimit items in
 * its stream's buffer and as many again in its queue: 1,000 gRPC watchers behind at 200 changes a second kept
 * 92 MB of the 128 MB heap `npm start` allows after a full collection, and in one such run of fourteen the
 * service's process was gone halfway (BENCHMARKS.md, 2026-12-06).
 */
const DEFAULT_HANDED_AT_ONCE = 64;

interface Watcher {
  readonly accept: (record: ChangeRecord) => boolean;
  readonly queue: WatchItem[];
  /** The bytes of the definitions in `queue`. */
  queuedBytes: number;
  /** Its share of the replay budget while its own start holds a read of the log; given back when it ends. */
  lease: Lease | undefined;
  /** Live records up to this revision were read by the watcher's own start (or precede its start). */
  readonly skipUpTo: number;
  /** The last revision handed to the queue or filtered out. */
  position: number;
  failure: RegistryError | undefined;
  ended: boolean;
  wake: (() => void) | undefined;
}

interface TenantFeed {
  readonly name: string;
  /** Every record up to this revision has been handed to the watchers. */
  position: number;
  readonly watchers: Set<Watcher>;
}

/** Where a watcher's own start reads the log: (from, to], with its first read's heads, if read. */
interface ReplayStart {
  readonly from: number;
  readonly to: number;
  readonly heads: ChangeHead[];
}

/**
 * The bytes an item's definition holds, counted as the log's heads count them (ChangeLog.heads): twice its JSON, for
 * its JSON and binary encodings; a bookmark holds none.
 */
function bytesOf(item: WatchItem): number {
  return item.type === "change" ? 2 * item.stored.json.byteLength : 0;
}

/** The revision of the item at `at` of a start's read (its first change was handed from there). */
function from(ready: readonly WatchItem[], at: number): number {
  return (ready[at] as WatchItem).revision;
}

function sumBytes(heads: readonly ChangeHead[]): number {
  let bytes = 0;
  for (const head of heads) bytes += head.bytes;
  return bytes;
}

export function createChangeReader(options: ChangeReaderOptions): ChangeReader {
  const { log, queueLimit, queueBytes, batchBytes, replay } = options;
  const shared = createSharedRecords();
  const batch = options.batchLimit ?? DEFAULT_BATCH;
  const handedAtOnce = options.handedAtOnce ?? DEFAULT_HANDED_AT_ONCE;
  const feeds = new Map<string, TenantFeed>();
  /** Feeds being set up: their first counter read. */
  const starting = new Map<string, Promise<TenantFeed>>();
  let closed = false;
  let polls = 0;
  let reads = 0;
  let pollTimer: ReturnType<typeof setTimeout> | undefined;

  const wake = (w: Watcher) => {
    const resume = w.wake;
    w.wake = undefined;
    resume?.();
  };
  const end = (w: Watcher, failure?: RegistryError) => {
    // Its read of the log goes back to the budget at once, whether or not its stream is ever read again.
    w.lease?.release();
    w.lease = undefined;
    if (w.ended) return;
    w.ended = true;
    if (failure !== undefined) {
      w.failure = failure;
      w.queue.length = 0;
      w.queuedBytes = 0;
    }
    wake(w);
  };
  const push = (w: Watcher, item: WatchItem) => {
    if (w.ended) return;
    if (item.type === "change") {
      if (item.revision <= w.skipUpTo) return;
      w.position = item.revision;
      if (!w.accept(item)) return;
    } else if (item.revision < w.position) return;
    const bytes = bytesOf(item);
    if (w.queue.length >= queueLimit) {
      end(w, watchTooSlow(`${queueLimit} events`, w.position));
      return;
    }
    if (w.queue.length > 0 && w.queuedBytes + bytes > queueBytes) {
      end(w, watchTooSlow(`${queueBytes} bytes`, w.position));
      return;
    }
    w.queue.push(item);
    w.queuedBytes += bytes;
    wake(w);
  };

  const feedOf = (tenant: string): Promise<TenantFeed> => {
    const known = feeds.get(tenant);
    if (known !== undefined) return Promise.resolve(known);
    let pending = starting.get(tenant);
    if (pending === undefined) {
      pending = log.revisions([tenant]).then(
        (revisions) => {
          starting.delete(tenant);
          const feed: TenantFeed = { name: tenant, position: revisions.get(tenant) ?? 0, watchers: new Set() };
          feeds.set(tenant, feed);
          return feed;
        },
        (error: unknown) => {
          starting.delete(tenant);
          throw error;
        },
      );
      starting.set(tenant, pending);
    }
    return pending;
  };

  /**
   * The first of `heads` that one read holds: at most `batchBytes` bytes, at least one (the heads of up to `batch`
   * records are read at once, and cut into reads one after the other).
   */
  const firstRead = (heads: readonly ChangeHead[]): ChangeHead[] => {
    let bytes = 0;
    let count = 0;
    for (const head of heads) {
      if (count > 0 && bytes + head.bytes > batchBytes) break;
      bytes += head.bytes;
      count++;
    }
    return heads.slice(0, count);
  };
  /** Reads the records `heads` name (their definitions whole); what compaction removed meanwhile is not there. */
  const readHeads = async (tenant: string, after: number, heads: readonly ChangeHead[]): Promise<ChangeRecord[]> => {
    const last = heads[heads.length - 1];
    if (last === undefined) return [];
    reads++;
    return log.read(tenant, after, last.revision, heads.length);
  };
  /** Hands the tenant's records up to `upTo` to its watchers, reading them in parts of at most batchBytes. */
  const advance = async (feed: TenantFeed, upTo: number) => {
    let heads: ChangeHead[] = [];
    while (feed.position < upTo) {
      if (heads.length === 0) heads = await log.heads(feed.name, feed.position, upTo, batch);
      const part = firstRead(heads);
      heads = heads.slice(part.length);
      const records = await readHeads(feed.name, feed.position, part);
      // Compaction removed records no watcher had yet: every watcher of the tenant misses them.
      if (records.length === 0 || (records[0] as ChangeRecord).revision !== feed.position + 1) {
        const lost = revisionCompacted(feed.position, records[0]?.revision, upTo);
        for (const w of feed.watchers) end(w, lost);
        feed.watchers.clear();
        feed.position = upTo;
        return;
      }
      for (const record of records) {
        // One item for every watcher: what a filter works out from it is worked out once (watch-service.ts).
        const item: WatchItem = { type: "change", ...record };
        for (const w of feed.watchers) {
          push(w, item);
          // Closed (too slow): it holds nothing more, and no longer counts.
          if (w.ended) feed.watchers.delete(w);
        }
        feed.position = record.revision;
      }
    }
  };

  const poll = async () => {
    polls++;
    for (const [name, feed] of feeds) if (feed.watchers.size === 0) feeds.delete(name);
    if (feeds.size === 0) return;
    const revisions = await log.revisions([...feeds.keys()]);
    for (const [name, revision] of revisions) {
      const feed = feeds.get(name);
      if (feed !== undefined && revision > feed.position) await advance(feed, revision);
    }
  };
  const schedule = () => {
    if (closed) return;
    pollTimer = setTimeout(() => {
      poll()
        .catch((error: unknown) => options.onError?.("watch poll", error))
        .finally(schedule);
    }, options.pollMs);
    pollTimer.unref?.();
  };
  schedule();

  const bookmarkTimer = setInterval(() => {
    for (const feed of feeds.values())
      for (const w of feed.watchers) {
        push(w, { type: "bookmark", revision: Math.max(feed.position, w.position) });
        if (w.ended) feed.watchers.delete(w);
      }
  }, options.bookmarkMs);
  bookmarkTimer.unref?.();

  const compact = (now = new Date()) => log.compact(options.retention, now);
  const compactTimer =
    options.compactMs > 0 && (options.retention.count > 0 || options.retention.maxAgeMs > 0)
      ? setInterval(() => {
          compact().catch((error: unknown) => options.onError?.("watch compaction", error));
        }, options.compactMs)
      : undefined;
  compactTimer?.unref?.();

  async function* items(
    feed: TenantFeed,
    w: Watcher,
    start: ReplayStart,
    bookmark: boolean,
    signal: AbortSignal | undefined,
    onAbort: () => void,
  ): AsyncGenerator<readonly WatchItem[]> {
    let { heads } = start;
    try {
      // The watcher's own start: the log from `from` up to where the feed stood when it joined, a read at a time,
      // each under its share of the replay budget, held until the watcher asks for more (what it was handed is
      // written) and given back before the next read.
      let position = start.from;
      while (position < start.to && !w.ended) {
        if (heads.length === 0) {
          heads = await log.heads(feed.name, position, start.to, batch);
          if (heads.length === 0 || (heads[0] as ChangeHead).revision !== position + 1)
            throw revisionCompacted(position, heads[0]?.revision, start.to);
        }
        const part = firstRead(heads);
        heads = heads.slice(part.length);
        if (w.lease === undefined) {
          const lease = await replay.take(sumBytes(part), { signal });
          if (w.ended) lease.release();
          else w.lease = lease;
        }
        const records = await shared.read(feed.name, position, part, () => readHeads(feed.name, position, part));
        if (records.length === 0 || (records[0] as ChangeRecord).revision !== position + 1)
          throw revisionCompacted(position, records[0]?.revision, start.to);
        position = (part[part.length - 1] as ChangeHead).revision;
        const ready: WatchItem[] = [];
        for (const record of records) if (w.accept(record)) ready.push({ type: "change", ...record });
        // At most handedAtOnce at a time here too: the read is this watcher's own, what waits to be written isn't.
        for (let at = 0; at < ready.length && !w.ended; at += handedAtOnce) {
          // A watcher whose client does not take what it was handed in time gives its share to the next.
          const hold = setTimeout(
            () => end(w, watchTooSlow(`${options.replayHoldMs} ms`, Math.max(from(ready, at) - 1, start.from))),
            options.replayHoldMs,
          );
          try {
            yield ready.slice(at, at + handedAtOnce);
          } finally {
            clearTimeout(hold);
          }
        }
        w.lease?.release();
        w.lease = undefined;
      }
      if (w.failure !== undefined) throw w.failure;
      if (bookmark && !w.ended) yield [{ type: "bookmark", revision: Math.max(start.to, w.skipUpTo) }];
      for (;;) {
        if (w.queue.length > 0) {
          // What is queued, up to handedAtOnce and batchBytes (at least one); the queue fills again (to its limits)
          // while the batch is written.
          yield takeQueued(w);
          continue;
        }
        if (w.failure !== undefined) throw w.failure;
        if (w.ended) return;
        await new Promise<void>((resolve) => {
          w.wake = resolve;
        });
      }
    } finally {
      w.lease?.release();
      w.lease = undefined;
      signal?.removeEventListener("abort", onAbort);
      w.ended = true;
      feed.watchers.delete(w);
    }
  }

  /** The head of `w`'s queue that it is handed at once: at most handedAtOnce items and batchBytes, at least one. */
  const takeQueued = (w: Watcher): WatchItem[] => {
    let count = 0;
    let bytes = 0;
    for (const item of w.queue) {
      const size = bytesOf(item);
      if (count === handedAtOnce || (count > 0 && bytes + size > batchBytes)) break;
      bytes += size;
      count++;
    }
    w.queuedBytes -= bytes;
    return w.queue.splice(0, count);
  };

  return {
    async watch({ tenant, since, accept, bookmark = false, signal }) {
      if (closed) throw new Error("The change reader is closed.");
      const feed = await feedOf(tenant);
      const joined = feed.position;
      let heads: ChangeHead[] = [];
      let lease: Lease | undefined;
      if (since !== undefined && since < joined) {
        // Checked before anything is sent: a compacted start is an error answer (410), not a broken stream. Only the
        // heads are read here; the first read's share of the replay budget is taken before the answer starts too, so
        // that a start the budget cannot take in time is refused (WATCH_BUSY) rather than left waiting.
        heads = await log.heads(tenant, since, joined, batch);
        if (heads.length === 0 || (heads[0] as ChangeHead).revision !== since + 1)
          throw revisionCompacted(since, await log.oldest(tenant), joined);
        lease = await replay.take(sumBytes(firstRead(heads)), {
          signal,
          waitMs: options.replayWaitMs,
          timedOut: () => watchReplayBusy(replay.limit),
        });
      }
      try {
        if (since !== undefined && since > joined) {
          const current = (await log.revisions([tenant])).get(tenant) ?? 0;
          if (since > current)
            throw invalid([
              issueAt("since", "OUT_OF_RANGE", `since ${since} is ahead of the tenant's revision ${current}.`),
            ]);
        }
      } catch (error) {
        lease?.release();
        throw error;
      }
      // The feed may have moved on while the start was checked: the watcher reads its own start up to
      // where the feed stands as it joins (synchronously, so no record falls between the two).
      // A poll may have dropped the feed (no watcher) and another watch made a new one meanwhile: join the
      // one the poll advances.
      const live = feeds.get(tenant) ?? feed;
      feeds.set(tenant, live);
      const to = live.position;
      const skipUpTo = Math.max(to, since ?? to);
      const w: Watcher = {
        accept,
        queue: [],
        queuedBytes: 0,
        lease,
        skipUpTo,
        position: skipUpTo,
        failure: undefined,
        ended: signal?.aborted === true,
        wake: undefined,
      };
      live.watchers.add(w);
      const from = since === undefined ? to : Math.min(since, to);
      // Listened to from here: a client gone before its stream was first read leaves a generator that never ran, and
      // its share of the replay budget goes back all the same.
      const onAbort = () => end(w);
      signal?.addEventListener("abort", onAbort);
      return items(live, w, { from, to, heads }, bookmark, signal, onAbort);
    },
    stats() {
      let watchers = 0;
      for (const feed of feeds.values()) watchers += feed.watchers.size;
      return { watchers, tenants: feeds.size, polls, reads };
    },
    compact,
    async close() {
      closed = true;
      if (pollTimer !== undefined) clearTimeout(pollTimer);
      clearInterval(bookmarkTimer);
      if (compactTimer !== undefined) clearInterval(compactTimer);
      for (const feed of feeds.values()) for (const w of feed.watchers) end(w);
    },
  };
}
