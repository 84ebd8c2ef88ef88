/**
 * The one change reader of a process (issue 20, item 4): it polls the counters of the tenants that have
 * watchers (one statement), reads each moved tenant's new change records once for all its watchers, in
 * revision order, and hands them to each watcher's bounded queue. A watcher that starts from an older
 * revision first reads the log from there (its own statements, once, at its start), then takes the live
 * records from where that read ended. Nothing a reconnecting watcher needs is held only in memory: the
 * log is in the database, so any process answers a resume the same way.
 */
import { invalid, issueAt, revisionCompacted } from "../domain/errors.js";
import type { ByteGate, Lease } from "./byte-gate.js";
import type { ChangeHead, ChangeLog, ChangeRecord, Retention } from "./change-log.js";
import { beginReplay, firstRead, type ReplayContext, type ReplayStart, replayLog } from "./change-replay.js";
import { end, push, type QueueLimits, takeQueued, type Watcher, type WatchItem } from "./change-watcher.js";
import { createSharedRecords } from "./shared-records.js";

export type { WatchItem } from "./change-watcher.js";

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

interface TenantFeed {
  readonly name: string;
  /** Every record up to this revision has been handed to the watchers. */
  position: number;
  readonly watchers: Set<Watcher>;
}

export function createChangeReader(options: ChangeReaderOptions): ChangeReader {
  return new PollingChangeReader(options);
}

/** The reader: one feed per tenant with watchers, polled on a timer; each watcher's own start is change-replay.ts's. */
class PollingChangeReader implements ChangeReader {
  readonly #options: ChangeReaderOptions;
  readonly #log: ChangeLog;
  readonly #batch: number;
  readonly #limits: QueueLimits;
  readonly #replay: ReplayContext;
  readonly #feeds = new Map<string, TenantFeed>();
  /** Feeds being set up: their first counter read. */
  readonly #starting = new Map<string, Promise<TenantFeed>>();
  #closed = false;
  #polls = 0;
  #reads = 0;
  #pollTimer: ReturnType<typeof setTimeout> | undefined;
  readonly #bookmarkTimer: ReturnType<typeof setInterval>;
  readonly #compactTimer: ReturnType<typeof setInterval> | undefined;

  constructor(options: ChangeReaderOptions) {
    const { log, queueLimit, queueBytes, batchBytes } = options;
    this.#options = options;
    this.#log = log;
    this.#batch = options.batchLimit ?? DEFAULT_BATCH;
    const handedAtOnce = options.handedAtOnce ?? DEFAULT_HANDED_AT_ONCE;
    this.#limits = { queueLimit, queueBytes, batchBytes, handedAtOnce };
    this.#replay = {
      log,
      gate: options.replay,
      shared: createSharedRecords(),
      batch: this.#batch,
      batchBytes,
      handedAtOnce,
      waitMs: options.replayWaitMs,
      holdMs: options.replayHoldMs,
      readHeads: (tenant, after, heads) => this.#readHeads(tenant, after, heads),
    };
    this.#schedule();
    this.#bookmarkTimer = setInterval(() => this.#bookmarkAll(), options.bookmarkMs);
    this.#bookmarkTimer.unref?.();
    this.#compactTimer =
      options.compactMs > 0 && (options.retention.count > 0 || options.retention.maxAgeMs > 0)
        ? setInterval(() => {
            this.compact().catch((error: unknown) => options.onError?.("watch compaction", error));
          }, options.compactMs)
        : undefined;
    this.#compactTimer?.unref?.();
  }

  async watch({ tenant, since, accept, bookmark = false, signal }: WatchStart) {
    if (this.#closed) throw new Error("The change reader is closed.");
    const feed = await this.#feedOf(tenant);
    const joined = feed.position;
    let heads: ChangeHead[] = [];
    let lease: Lease | undefined;
    if (since !== undefined && since < joined)
      ({ heads, lease } = await beginReplay(this.#replay, tenant, since, joined, signal));
    try {
      if (since !== undefined && since > joined) await this.#notAhead(tenant, since);
    } catch (error) {
      lease?.release();
      throw error;
    }
    // The feed may have moved on while the start was checked: the watcher reads its own start up to
    // where the feed stands as it joins (synchronously, so no record falls between the two).
    // A poll may have dropped the feed (no watcher) and another watch made a new one meanwhile: join the
    // one the poll advances.
    const live = this.#feeds.get(tenant) ?? feed;
    this.#feeds.set(tenant, live);
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
    return this.#items(live, w, { from, to, heads }, bookmark, signal, onAbort);
  }

  stats() {
    let watchers = 0;
    for (const feed of this.#feeds.values()) watchers += feed.watchers.size;
    return { watchers, tenants: this.#feeds.size, polls: this.#polls, reads: this.#reads };
  }

  compact(now = new Date()) {
    return this.#log.compact(this.#options.retention, now);
  }

  async close() {
    this.#closed = true;
    if (this.#pollTimer !== undefined) clearTimeout(this.#pollTimer);
    clearInterval(this.#bookmarkTimer);
    if (this.#compactTimer !== undefined) clearInterval(this.#compactTimer);
    for (const feed of this.#feeds.values()) for (const w of feed.watchers) end(w);
  }

  /** VALIDATION_FAILED when `since` is ahead of the tenant's revision. */
  async #notAhead(tenant: string, since: number) {
    const current = (await this.#log.revisions([tenant])).get(tenant) ?? 0;
    if (since > current)
      throw invalid([issueAt("since", "OUT_OF_RANGE", `since ${since} is ahead of the tenant's revision ${current}.`)]);
  }

  /** The watcher's items: its own start (change-replay.ts), a bookmark if asked, then what its queue holds. */
  async *#items(
    feed: TenantFeed,
    w: Watcher,
    start: ReplayStart,
    bookmark: boolean,
    signal: AbortSignal | undefined,
    onAbort: () => void,
  ): AsyncGenerator<readonly WatchItem[]> {
    try {
      yield* replayLog(this.#replay, feed.name, w, start, signal);
      if (w.failure !== undefined) throw w.failure;
      if (bookmark && !w.ended) yield [{ type: "bookmark", revision: Math.max(start.to, w.skipUpTo) }];
      for (;;) {
        if (w.queue.length > 0) {
          // What is queued, up to handedAtOnce and batchBytes (at least one); the queue fills again (to its limits)
          // while the batch is written.
          yield takeQueued(w, this.#limits);
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

  #feedOf(tenant: string): Promise<TenantFeed> {
    const known = this.#feeds.get(tenant);
    if (known !== undefined) return Promise.resolve(known);
    let pending = this.#starting.get(tenant);
    if (pending === undefined) {
      pending = this.#log.revisions([tenant]).then(
        (revisions) => {
          this.#starting.delete(tenant);
          const feed: TenantFeed = { name: tenant, position: revisions.get(tenant) ?? 0, watchers: new Set() };
          this.#feeds.set(tenant, feed);
          return feed;
        },
        (error: unknown) => {
          this.#starting.delete(tenant);
          throw error;
        },
      );
      this.#starting.set(tenant, pending);
    }
    return pending;
  }

  /** Reads the records `heads` name (their definitions whole); what compaction removed meanwhile is not there. */
  async #readHeads(tenant: string, after: number, heads: readonly ChangeHead[]): Promise<ChangeRecord[]> {
    const last = heads[heads.length - 1];
    if (last === undefined) return [];
    this.#reads++;
    return this.#log.read(tenant, after, last.revision, heads.length);
  }

  /** Hands the tenant's records up to `upTo` to its watchers, reading them in parts of at most batchBytes. */
  async #advance(feed: TenantFeed, upTo: number) {
    let heads: ChangeHead[] = [];
    while (feed.position < upTo) {
      if (heads.length === 0) heads = await this.#log.heads(feed.name, feed.position, upTo, this.#batch);
      const part = firstRead(heads, this.#limits.batchBytes);
      heads = heads.slice(part.length);
      const records = await this.#readHeads(feed.name, feed.position, part);
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
          push(w, item, this.#limits);
          // Closed (too slow): it holds nothing more, and no longer counts.
          if (w.ended) feed.watchers.delete(w);
        }
        feed.position = record.revision;
      }
    }
  }

  async #poll() {
    this.#polls++;
    for (const [name, feed] of this.#feeds) if (feed.watchers.size === 0) this.#feeds.delete(name);
    if (this.#feeds.size === 0) return;
    const revisions = await this.#log.revisions([...this.#feeds.keys()]);
    for (const [name, revision] of revisions) {
      const feed = this.#feeds.get(name);
      if (feed !== undefined && revision > feed.position) await this.#advance(feed, revision);
    }
  }

  #schedule() {
    if (this.#closed) return;
    this.#pollTimer = setTimeout(() => {
      this.#poll()
        .catch((error: unknown) => this.#options.onError?.("watch poll", error))
        .finally(() => this.#schedule());
    }, this.#options.pollMs);
    this.#pollTimer.unref?.();
  }

  #bookmarkAll() {
    for (const feed of this.#feeds.values())
      for (const w of feed.watchers) {
        push(w, { type: "bookmark", revision: Math.max(feed.position, w.position) }, this.#limits);
        if (w.ended) feed.watchers.delete(w);
      }
  }
}
