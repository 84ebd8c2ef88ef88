/**
 * The one change reader of a process (issue 20, item 4): it polls the counters of the tenants that have
 * watchers (one statement), reads each moved tenant's new change records once for all its watchers, in
 * revision order, and hands them to each watcher's bounded queue. A watcher that starts from an older
 * revision first reads the log from there (its own statements, once, at its start), then takes the live
 * records from where that read ended. Nothing a reconnecting watcher needs is held only in memory: the
 * log is in the database, so any process answers a resume the same way.
 */
import { invalid, issueAt, type RegistryError, revisionCompacted, watchTooSlow } from "../domain/errors.js";
import type { ChangeLog, ChangeRecord, Retention } from "./change-log.js";

/** What a watcher receives: a change record, or a bookmark (everything up to `revision` has been handed on). */
export type WatchItem =
  | ({ readonly type: "change" } & ChangeRecord)
  | { readonly type: "bookmark"; readonly revision: number };

export interface ChangeReaderOptions {
  readonly log: ChangeLog;
  /** How often the counters are polled (WATCH_POLL_MS). */
  readonly pollMillis: number;
  /** How often each watcher gets a bookmark (WATCH_BOOKMARK_SECONDS). */
  readonly bookmarkMillis: number;
  /** How many undelivered items a watcher may hold before it is closed (WATCH_QUEUE_LIMIT). */
  readonly queueLimit: number;
  /** How many change records one statement reads. */
  readonly batchLimit?: number;
  /** The most items a watcher is handed at once, queued or read for its start (default 64). */
  readonly handedAtOnce?: number;
  readonly retention: Retention;
  /** How often the log is compacted (WATCH_COMPACT_SECONDS); 0: never. */
  readonly compactMillis: number;
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
  /** How many watchers, over how many tenants, and how many polls and record reads so far (for tests, metrics). */
  stats(): { watchers: number; tenants: number; polls: number; reads: number };
  /** Compacts the log now (also done every compactMillis). */
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

export function createChangeReader(options: ChangeReaderOptions): ChangeReader {
  const { log, queueLimit } = options;
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
    if (w.ended) return;
    w.ended = true;
    if (failure !== undefined) {
      w.failure = failure;
      w.queue.length = 0;
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
    if (w.queue.length >= queueLimit) {
      end(w, watchTooSlow(queueLimit, w.position));
      return;
    }
    w.queue.push(item);
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

  /** Hands the tenant's records up to `upTo` to its watchers, reading them in batches. */
  const advance = async (feed: TenantFeed, upTo: number) => {
    while (feed.position < upTo) {
      const records = await log.read(feed.name, feed.position, upTo, batch);
      reads++;
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
    }, options.pollMillis);
    pollTimer.unref?.();
  };
  schedule();

  const bookmarkTimer = setInterval(() => {
    for (const feed of feeds.values())
      for (const w of feed.watchers) {
        push(w, { type: "bookmark", revision: Math.max(feed.position, w.position) });
        if (w.ended) feed.watchers.delete(w);
      }
  }, options.bookmarkMillis);
  bookmarkTimer.unref?.();

  const compact = (now = new Date()) => log.compact(options.retention, now);
  const compactTimer =
    options.compactMillis > 0 && (options.retention.count > 0 || options.retention.maxAgeMillis > 0)
      ? setInterval(() => {
          compact().catch((error: unknown) => options.onError?.("watch compaction", error));
        }, options.compactMillis)
      : undefined;
  compactTimer?.unref?.();

  async function* items(
    feed: TenantFeed,
    w: Watcher,
    first: ChangeRecord[],
    from: number,
    to: number,
    bookmark: boolean,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<readonly WatchItem[]> {
    const onAbort = () => end(w);
    signal?.addEventListener("abort", onAbort);
    try {
      // The watcher's own start: the log from `from` up to where the feed stood when it joined.
      let records = first;
      let position = from;
      while (position < to) {
        if (records.length === 0) records = await log.read(feed.name, position, to, batch);
        if (records.length === 0 || (records[0] as ChangeRecord).revision !== position + 1)
          throw revisionCompacted(position, records[0]?.revision, to);
        const ready: WatchItem[] = [];
        for (const record of records) {
          if (w.accept(record)) ready.push({ type: "change", ...record });
          position = record.revision;
        }
        // At most handedAtOnce at a time here too: the read is this watcher's own, what waits to be written isn't.
        for (let at = 0; at < ready.length && !w.ended; at += handedAtOnce) yield ready.slice(at, at + handedAtOnce);
        if (w.ended) break;
        records = [];
      }
      if (bookmark && !w.ended) yield [{ type: "bookmark", revision: Math.max(to, w.skipUpTo) }];
      for (;;) {
        if (w.queue.length > 0) {
          // What is queued, up to handedAtOnce; the queue fills again (to queueLimit) while the batch is written.
          yield w.queue.splice(0, handedAtOnce);
          continue;
        }
        if (w.failure !== undefined) throw w.failure;
        if (w.ended) return;
        await new Promise<void>((resolve) => {
          w.wake = resolve;
        });
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
      w.ended = true;
      feed.watchers.delete(w);
    }
  }

  return {
    async watch({ tenant, since, accept, bookmark = false, signal }) {
      if (closed) throw new Error("The change reader is closed.");
      const feed = await feedOf(tenant);
      const joined = feed.position;
      let first: ChangeRecord[] = [];
      if (since !== undefined && since < joined) {
        // Checked before anything is sent: a compacted start is an error answer (410), not a broken stream.
        first = await log.read(tenant, since, joined, batch);
        reads++;
        if (first.length === 0 || (first[0] as ChangeRecord).revision !== since + 1)
          throw revisionCompacted(since, await log.oldest(tenant), joined);
      }
      if (since !== undefined && since > joined) {
        const current = (await log.revisions([tenant])).get(tenant) ?? 0;
        if (since > current)
          throw invalid([
            issueAt("since", "OUT_OF_RANGE", `since ${since} is ahead of the tenant's revision ${current}.`),
          ]);
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
        skipUpTo,
        position: skipUpTo,
        failure: undefined,
        ended: signal?.aborted === true,
        wake: undefined,
      };
      live.watchers.add(w);
      const from = since === undefined ? to : Math.min(since, to);
      return items(live, w, first, from, to, bookmark, signal);
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
