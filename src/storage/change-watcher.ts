/**
 * One watcher of the change reader (change-reader.ts): what it accepts, its bounded queue of items not yet handed
 * on, and how it ends. The reader's feed pushes to it, its stream takes from it; both go through the functions here,
 * which hold its limits (WATCH_QUEUE_LIMIT, WATCH_QUEUE_MAX_BYTES).
 */
import { type RegistryError, watchTooSlow } from "../domain/errors.js";
import type { Lease } from "./byte-gate.js";
import type { ChangeRecord } from "./change-log.js";

/** What a watcher receives: a change record, or a bookmark (everything up to `revision` has been handed on). */
export type WatchItem =
  | ({ readonly type: "change" } & ChangeRecord)
  | { readonly type: "bookmark"; readonly revision: number };

export interface Watcher {
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

/** The limits of a watcher's queue, and of what it is handed at once. */
export interface QueueLimits {
  /** Items queued, not yet handed on (WATCH_QUEUE_LIMIT). */
  readonly queueLimit: number;
  /** Bytes of definitions queued, not yet handed on (WATCH_QUEUE_MAX_BYTES); at least one item. */
  readonly queueBytes: number;
  /** Bytes of definitions handed at once (WATCH_BATCH_MAX_BYTES); at least one item. */
  readonly batchBytes: number;
  /** Items handed at once. */
  readonly handedAtOnce: number;
}

/**
 * The bytes an item's definition holds, counted as the log's heads count them (ChangeLog.heads): twice its JSON, for
 * its JSON and binary encodings; a bookmark holds none.
 */
export function bytesOf(item: WatchItem): number {
  return item.type === "change" ? 2 * item.stored.json.byteLength : 0;
}

/** Gives its stream a turn, if it waits for one. */
export function wake(w: Watcher): void {
  const resume = w.wake;
  w.wake = undefined;
  resume?.();
}

/** Ends the watcher: cleanly, or with `failure` (what it queued is dropped); its share of the replay goes back. */
export function end(w: Watcher, failure?: RegistryError): void {
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
}

/**
 * Queues `item` for the watcher, unless its own start read it already or it does not accept it; a watcher whose
 * queue is full (items or bytes) ends with WATCH_TOO_SLOW.
 */
export function push(w: Watcher, item: WatchItem, limits: QueueLimits): void {
  if (w.ended) return;
  if (item.type === "change") {
    if (item.revision <= w.skipUpTo) return;
    w.position = item.revision;
    if (!w.accept(item)) return;
  } else if (item.revision < w.position) return;
  const bytes = bytesOf(item);
  if (w.queue.length >= limits.queueLimit) {
    end(w, watchTooSlow(`${limits.queueLimit} events`, w.position));
    return;
  }
  if (w.queue.length > 0 && w.queuedBytes + bytes > limits.queueBytes) {
    end(w, watchTooSlow(`${limits.queueBytes} bytes`, w.position));
    return;
  }
  w.queue.push(item);
  w.queuedBytes += bytes;
  wake(w);
}

/** The head of `w`'s queue that it is handed at once: at most handedAtOnce items and batchBytes, at least one. */
export function takeQueued(w: Watcher, limits: QueueLimits): WatchItem[] {
  let count = 0;
  let bytes = 0;
  for (const item of w.queue) {
    const size = bytesOf(item);
    if (count === limits.handedAtOnce || (count > 0 && bytes + size > limits.batchBytes)) break;
    bytes += size;
    count++;
  }
  w.queuedBytes -= bytes;
  return w.queue.splice(0, count);
}
