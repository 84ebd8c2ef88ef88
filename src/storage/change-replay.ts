/**
 * A watcher's own start (change-reader.ts): the log from an older revision up to where the reader's feed stood when
 * the watcher joined, read in parts of at most WATCH_BATCH_MAX_BYTES, each under the watcher's share of the replay
 * budget (a lease of WATCH_REPLAY_MAX_BYTES, a ByteGate), and each from memory when other watchers' starts still
 * hold its records (shared-records.ts). The share is held until the watcher asks for more (its surface wrote what it
 * was handed), at most WATCH_REPLAY_HOLD_MS, and given back before the next read.
 */
import { revisionCompacted, watchReplayBusy, watchTooSlow } from "../domain/errors.js";
import type { ByteGate, Lease } from "./byte-gate.js";
import type { ChangeHead, ChangeLog, ChangeRecord } from "./change-log.js";
import { end, type Watcher, type WatchItem } from "./change-watcher.js";
import type { SharedRecords } from "./shared-records.js";

/** What the replays of one reader share: its log, its budget, its limits. */
export interface ReplayContext {
  readonly log: ChangeLog;
  /** The replay budget (WATCH_REPLAY_MAX_BYTES). */
  readonly gate: ByteGate;
  readonly shared: SharedRecords;
  /** How many heads one statement reads. */
  readonly batch: number;
  /** The most bytes one read holds (WATCH_BATCH_MAX_BYTES); at least one record. */
  readonly batchBytes: number;
  /** The most items a watcher is handed at once. */
  readonly handedAtOnce: number;
  /** How long a start waits for its first read's share before it is refused (WATCH_REPLAY_WAIT_MS). */
  readonly waitMs: number;
  /** How long a watcher may hold what it was handed before it asks for more (WATCH_REPLAY_HOLD_MS). */
  readonly holdMs: number;
  /** Reads the records `heads` name (the reader counts its reads). */
  readonly readHeads: (tenant: string, after: number, heads: readonly ChangeHead[]) => Promise<ChangeRecord[]>;
}

/** Where a watcher's own start reads the log: (from, to], with its first read's heads, if read. */
export interface ReplayStart {
  readonly from: number;
  readonly to: number;
  readonly heads: ChangeHead[];
}

/**
 * The first of `heads` that one read holds: at most `batchBytes` bytes, at least one (the heads of up to a batch of
 * records are read at once, and cut into reads one after the other).
 */
export function firstRead(heads: readonly ChangeHead[], batchBytes: number): ChangeHead[] {
  let bytes = 0;
  let count = 0;
  for (const head of heads) {
    if (count > 0 && bytes + head.bytes > batchBytes) break;
    bytes += head.bytes;
    count++;
  }
  return heads.slice(0, count);
}

function sumBytes(heads: readonly ChangeHead[]): number {
  let bytes = 0;
  for (const head of heads) bytes += head.bytes;
  return bytes;
}

/** The revision of the item at `at` of a start's read (its first change was handed from there). */
function revisionAt(ready: readonly WatchItem[], at: number): number {
  return (ready[at] as WatchItem).revision;
}

/**
 * Checks a start from `since` (older than `joined`, where the feed stands) before anything is sent: a compacted start
 * is an error answer (410), not a broken stream. Only the heads are read here; the first read's share of the replay
 * budget is taken before the answer starts too, so that a start the budget cannot take in time is refused
 * (WATCH_BUSY) rather than left waiting.
 */
export async function beginReplay(
  context: ReplayContext,
  tenant: string,
  since: number,
  joined: number,
  signal: AbortSignal | undefined,
): Promise<{ heads: ChangeHead[]; lease: Lease }> {
  const { log, gate } = context;
  const heads = await log.heads(tenant, since, joined, context.batch);
  if (heads.length === 0 || (heads[0] as ChangeHead).revision !== since + 1)
    throw revisionCompacted(since, await log.oldest(tenant), joined);
  const lease = await gate.take(sumBytes(firstRead(heads, context.batchBytes)), {
    signal,
    waitMs: context.waitMs,
    timedOut: () => watchReplayBusy(gate.limit),
  });
  return { heads, lease };
}

/**
 * The watcher's own start: the log from `start.from` up to `start.to`, a read at a time, each under its share of the
 * replay budget (taken here unless the watcher holds it), held until the watcher asks for more (what it was handed
 * is written) and given back before the next read. Stops early when the watcher ends.
 */
export async function* replayLog(
  context: ReplayContext,
  tenant: string,
  w: Watcher,
  start: ReplayStart,
  signal: AbortSignal | undefined,
): AsyncGenerator<readonly WatchItem[]> {
  let { heads } = start;
  let position = start.from;
  while (position < start.to && !w.ended) {
    if (heads.length === 0) {
      heads = await context.log.heads(tenant, position, start.to, context.batch);
      if (heads.length === 0 || (heads[0] as ChangeHead).revision !== position + 1)
        throw revisionCompacted(position, heads[0]?.revision, start.to);
    }
    const part = firstRead(heads, context.batchBytes);
    heads = heads.slice(part.length);
    if (w.lease === undefined) {
      const lease = await context.gate.take(sumBytes(part), { signal });
      if (w.ended) lease.release();
      else w.lease = lease;
    }
    const after = position;
    const records = await context.shared.read(tenant, after, part, () => context.readHeads(tenant, after, part));
    if (records.length === 0 || (records[0] as ChangeRecord).revision !== position + 1)
      throw revisionCompacted(position, records[0]?.revision, start.to);
    position = (part[part.length - 1] as ChangeHead).revision;
    const ready: WatchItem[] = [];
    for (const record of records) if (w.accept(record)) ready.push({ type: "change", ...record });
    yield* handOut(context, w, ready, start.from);
    w.lease?.release();
    w.lease = undefined;
  }
}

/**
 * Hands `ready` (one read of a start from `from`) to the watcher, at most handedAtOnce at a time here too: the read is
 * this watcher's own, what waits to be written isn't. A watcher whose client does not take what it was handed in
 * time (WATCH_REPLAY_HOLD_MS) ends with WATCH_TOO_SLOW and gives its share to the next.
 */
async function* handOut(
  context: ReplayContext,
  w: Watcher,
  ready: readonly WatchItem[],
  from: number,
): AsyncGenerator<readonly WatchItem[]> {
  const { handedAtOnce, holdMs } = context;
  for (let at = 0; at < ready.length && !w.ended; at += handedAtOnce) {
    const hold = setTimeout(
      () => end(w, watchTooSlow(`${holdMs} ms`, Math.max(revisionAt(ready, at) - 1, from))),
      holdMs,
    );
    try {
      yield ready.slice(at, at + handedAtOnce);
    } finally {
      clearTimeout(hold);
    }
  }
}
