/**
 * SQLite's WAL checkpoints off the event loop (issue 50). better-sqlite3 and
 * `node:sqlite` run a COMMIT synchronously, and by default the COMMIT that
 * takes the WAL past `wal_autocheckpoint` (1,000 pages) also checkpoints it:
 * copies the WAL's pages into the database file and syncs it, tens to hundreds
 * of milliseconds on the main thread. With ~1 MB definitions nearly every
 * COMMIT crossed it (COMMIT p50 110 ms; 53 ms without the checkpoint).
 *
 * So the writer's connection checkpoints only past a hard cap
 * (SQLITE_WAL_HARD_CAP_BYTES, its `wal_autocheckpoint`: the backstop should
 * this thread stall or die), and a worker thread with its own connection to
 * the file (sqlite-checkpoint-thread.ts) runs the PASSIVE checkpoints every
 * `intervalMs`, which never wait and never make the writer wait.
 *
 * A WAL is started over from its beginning by the first write that finds
 * every frame of it checkpointed (and no reader in it); otherwise the next
 * write appends. Back-to-back writes would always find the last one's frames
 * not yet copied, and the WAL would grow to the hard cap, where the writer
 * checkpoints on the loop. beforeWrite() prevents it: once the WAL has passed
 * SQLITE_WAL_SOFT_CAP_BYTES, the next write transaction, holding the pool's
 * one connection (so no other commit comes between), first waits, off the
 * loop, for a checkpoint of the thread; its first write then starts the WAL
 * over.
 *
 * The thread starts at the first write (a repository that only reads never
 * starts it), unreferenced: it keeps no process alive. Its entry is loaded as
 * the search workers' is (thread-entry.ts).
 */
import { Worker } from "node:worker_threads";
import type {
  CheckpointReply,
  CheckpointRequest,
  CheckpointResult,
  CheckpointWorkerData,
} from "./sqlite-checkpoint-thread.js";
import { threadEntry } from "./thread-entry.js";

/**
 * The WAL's size past which the next write first waits for a checkpoint of the thread (beforeWrite): four
 * times SQLite's default auto-checkpoint (1,000 pages of 4 KiB), a few ~1 MB definitions' worth.
 */
export const SQLITE_WAL_SOFT_CAP_BYTES = 16 * 1024 * 1024;

/**
 * The writer connection's `wal_autocheckpoint` while a checkpoint thread runs, in bytes (connection.ts
 * divides by the page size): the WAL's bound should the thread stall, die or be refused its checkpoints.
 */
export const SQLITE_WAL_HARD_CAP_BYTES = 64 * 1024 * 1024;

/** The longest a write waits for the thread's checkpoint (beforeWrite) before it goes on without it. */
const CHECKPOINT_WAIT_MS = 2_000;

/** How long close() waits for the thread to close its connection and end before it terminates it. */
const STOP_WAIT_MS = 5_000;

/** The default of `SQLITE_CHECKPOINT_INTERVAL_MS`. */
export const defaultSqliteCheckpointIntervalMs = 250;

/** The WAL checkpoints of one SQLite file, run on a thread. */
export interface SqliteCheckpointer {
  /**
   * Called before each write transaction, holding the writer's connection: starts the thread at the first, and
   * once the WAL has passed SQLITE_WAL_SOFT_CAP_BYTES resolves after a checkpoint of the thread (at most
   * CHECKPOINT_WAIT_MS), else at once.
   */
  beforeWrite(): Promise<void>;
  /** What the thread has done: checkpoints run, and what the last one found (undefined before it). */
  stats(): { readonly checkpoints: number; readonly last: CheckpointResult | undefined; readonly pageSize: number };
  /** Stops the thread and closes its connection (a checkpoint running ends first). */
  close(): Promise<void>;
}

/** A checkpointer of `filename`'s WAL every `intervalMs` (> 0); its thread starts at the first write. */
export function createSqliteCheckpointer(filename: string, intervalMs: number): SqliteCheckpointer {
  if (!Number.isInteger(intervalMs) || intervalMs < 1)
    throw new Error(`A checkpoint interval must be a whole number of milliseconds, at least 1, not ${intervalMs}.`);
  return new CheckpointThread(filename, intervalMs);
}

/** A promise and the function that settles it. */
function settleable(): { readonly done: Promise<void>; readonly resolve: () => void } {
  let resolve = (): void => undefined;
  const done = new Promise<void>((settle) => {
    resolve = settle;
  });
  return { done, resolve };
}

/** Resolves with `promise`, or with `fallback` after `ms`, whichever comes first; the timer is cleared. */
async function within<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The checkpointer: its thread, and what the thread last told of the WAL. */
class CheckpointThread implements SqliteCheckpointer {
  #worker: Worker | undefined;
  #ready = false;
  #closed = false;
  #pageSize = 4096;
  #checkpoints = 0;
  #last: CheckpointResult | undefined;
  /**
   * The WAL's frames as the last checkpoint found them; 0 after a checkpoint a write waited for found every frame
   * copied (that write starts the WAL over).
   */
  #frames = 0;
  #lastRequest = 0;
  /** The checkpoint asked for and not yet answered, shared by the writes that wait for it. */
  #asked: { readonly id: number; readonly done: Promise<void>; readonly resolve: () => void } | undefined;
  #exited: Promise<void> = Promise.resolve();

  readonly #filename: string;
  readonly #intervalMs: number;

  constructor(filename: string, intervalMs: number) {
    this.#filename = filename;
    this.#intervalMs = intervalMs;
  }

  /** An arrow, so that it may be handed on alone (sql-writer.ts gives it to the transaction runner). */
  readonly beforeWrite = (): Promise<void> => {
    if (this.#closed) return Promise.resolve();
    if (this.#worker === undefined) this.#start();
    if (!this.#ready || this.#frames * this.#pageSize < SQLITE_WAL_SOFT_CAP_BYTES) return Promise.resolve();
    if (this.#asked === undefined) {
      const id = ++this.#lastRequest;
      this.#asked = { id, ...settleable() };
      this.#worker?.postMessage({ checkpoint: id } satisfies CheckpointRequest);
    }
    return within(this.#asked.done, CHECKPOINT_WAIT_MS, undefined);
  };

  stats() {
    return { checkpoints: this.#checkpoints, last: this.#last, pageSize: this.#pageSize };
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#answer();
    const worker = this.#worker;
    if (worker === undefined) return;
    // A thread still starting has no connection to close yet: it is ended. A ready one closes its own,
    // then is ended (its `stopped` reply).
    if (this.#ready) {
      worker.postMessage({ stop: true } satisfies CheckpointRequest);
      const stuck = await within(
        this.#exited.then(() => false),
        STOP_WAIT_MS,
        true,
      );
      if (!stuck) return;
    }
    await worker.terminate().catch(() => undefined);
    await this.#exited;
  }

  #answer(): void {
    this.#asked?.resolve();
    this.#asked = undefined;
  }

  #start(): void {
    const entry = threadEntry("sqlite-checkpoint-thread");
    const thread = new Worker(entry.source, {
      eval: entry.eval,
      workerData: { filename: this.#filename, intervalMs: this.#intervalMs } satisfies CheckpointWorkerData,
    });
    thread.unref();
    this.#worker = thread;
    this.#exited = new Promise((resolve) => thread.once("exit", () => resolve()));
    thread.on("message", (reply: CheckpointReply) => this.#onReply(thread, reply));
    const gone = (): void => {
      // Its connection closes with it; the writer's auto-checkpoint is the bound from now on.
      this.#ready = false;
      this.#answer();
    };
    thread.on("error", gone);
    thread.on("exit", gone);
  }

  #onReply(thread: Worker, reply: CheckpointReply): void {
    if ("stopped" in reply) {
      // Its connection is closed (close()); the thread is idle, so it ends at once.
      void thread.terminate().catch(() => undefined);
    } else if ("ready" in reply) {
      this.#ready = true;
      this.#pageSize = reply.pageSize;
    } else if ("result" in reply) {
      this.#checkpoints++;
      this.#last = reply.result;
      this.#frames = reply.result.log;
      if (reply.checkpoint !== undefined && reply.checkpoint === this.#asked?.id) {
        if (reply.result.checkpointed >= reply.result.log) this.#frames = 0;
        this.#answer();
      }
    } else {
      // A checkpoint that failed (the disk full, say), or a connection that could not open (the thread is
      // then ended): the writer's own auto-checkpoint past the hard cap still bounds the WAL.
      if (!this.#ready) void thread.terminate().catch(() => undefined);
      this.#answer();
    }
  }
}
