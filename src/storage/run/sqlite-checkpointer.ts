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
 * `intervalMillis`, which never wait and never make the writer wait.
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
 * the search workers' is (sqlite-search-worker.ts workerEntry).
 */
import { Worker } from "node:worker_threads";
import type {
  CheckpointReply,
  CheckpointRequest,
  CheckpointResult,
  CheckpointWorkerData,
} from "./sqlite-checkpoint-thread.js";

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
const CHECKPOINT_WAIT_MILLIS = 2_000;

/** How long close() waits for the thread to close its connection and end before it terminates it. */
const STOP_WAIT_MILLIS = 5_000;

/** The default of `SQLITE_CHECKPOINT_INTERVAL_MS`. */
export const defaultSqliteCheckpointIntervalMs = 250;

/** The WAL checkpoints of one SQLite file, run on a thread. */
export interface SqliteCheckpointer {
  /**
   * Called before each write transaction, holding the writer's connection: starts the thread at the first, and
   * once the WAL has passed SQLITE_WAL_SOFT_CAP_BYTES resolves after a checkpoint of the thread (at most
   * CHECKPOINT_WAIT_MILLIS), else at once.
   */
  beforeWrite(): Promise<void>;
  /** What the thread has done: checkpoints run, and what the last one found (undefined before it). */
  stats(): { readonly checkpoints: number; readonly last: CheckpointResult | undefined; readonly pageSize: number };
  /** Stops the thread and closes its connection (a checkpoint running ends first). */
  close(): Promise<void>;
}

/** The thread's entry: compiled JavaScript, TypeScript under Deno, or TypeScript through tsx from sources. */
function threadEntry(): { readonly source: URL | string; readonly eval: boolean } {
  const fromSources = import.meta.url.endsWith(".ts");
  const url = new URL(`./sqlite-checkpoint-thread.${fromSources ? "ts" : "js"}`, import.meta.url);
  if (!fromSources || "Deno" in globalThis) return { source: url, eval: false };
  const tsx = JSON.stringify(import.meta.resolve("tsx/esm/api"));
  return {
    source: `import(${tsx}).then(({ register }) => { register(); return import(${JSON.stringify(url.href)}); });`,
    eval: true,
  };
}

/** A checkpointer of `filename`'s WAL every `intervalMillis` (> 0); its thread starts at the first write. */
export function createSqliteCheckpointer(filename: string, intervalMillis: number): SqliteCheckpointer {
  if (!Number.isInteger(intervalMillis) || intervalMillis < 1)
    throw new Error(`A checkpoint interval must be a whole number of milliseconds, at least 1, not ${intervalMillis}.`);
  let worker: Worker | undefined;
  let ready = false;
  let closed = false;
  let pageSize = 4096;
  let checkpoints = 0;
  let last: CheckpointResult | undefined;
  /**
   * The WAL's frames as the last checkpoint found them; 0 after a checkpoint a write waited for found every frame
   * copied (that write starts the WAL over).
   */
  let frames = 0;
  let lastRequest = 0;
  /** The checkpoint asked for and not yet answered, shared by the writes that wait for it. */
  let asked: { readonly id: number; readonly done: Promise<void>; readonly resolve: () => void } | undefined;
  let exited: Promise<void> = Promise.resolve();

  const answer = (): void => {
    asked?.resolve();
    asked = undefined;
  };

  const start = (): void => {
    const entry = threadEntry();
    const thread = new Worker(entry.source, {
      eval: entry.eval,
      workerData: { filename, intervalMillis } satisfies CheckpointWorkerData,
    });
    thread.unref();
    worker = thread;
    exited = new Promise((resolve) => thread.once("exit", () => resolve()));
    thread.on("message", (reply: CheckpointReply) => {
      if ("stopped" in reply) {
        // Its connection is closed (close()); the thread is idle, so it ends at once.
        void thread.terminate().catch(() => undefined);
      } else if ("ready" in reply) {
        ready = true;
        pageSize = reply.pageSize;
      } else if ("result" in reply) {
        checkpoints++;
        last = reply.result;
        frames = last.log;
        if (reply.checkpoint !== undefined && reply.checkpoint === asked?.id) {
          if (last.checkpointed >= last.log) frames = 0;
          answer();
        }
      } else {
        // A checkpoint that failed (the disk full, say), or a connection that could not open (the thread is
        // then ended): the writer's own auto-checkpoint past the hard cap still bounds the WAL.
        if (!ready) void thread.terminate().catch(() => undefined);
        answer();
      }
    });
    thread.on("error", () => {
      // Its connection closes with it; the writer's auto-checkpoint is the bound from now on.
      ready = false;
      answer();
    });
    thread.on("exit", () => {
      ready = false;
      answer();
    });
  };

  return {
    beforeWrite() {
      if (closed) return Promise.resolve();
      if (worker === undefined) start();
      if (!ready || frames * pageSize < SQLITE_WAL_SOFT_CAP_BYTES) return Promise.resolve();
      if (asked === undefined) {
        let resolve = (): void => undefined;
        const done = new Promise<void>((settle) => {
          resolve = settle;
        });
        const id = ++lastRequest;
        asked = { id, done, resolve };
        worker?.postMessage({ checkpoint: id } satisfies CheckpointRequest);
      }
      const waiting = asked.done;
      let timer: ReturnType<typeof setTimeout> | undefined;
      return Promise.race([
        waiting,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, CHECKPOINT_WAIT_MILLIS);
        }),
      ]).finally(() => clearTimeout(timer));
    },

    stats: () => ({ checkpoints, last, pageSize }),

    async close() {
      if (closed) return;
      closed = true;
      answer();
      if (worker === undefined) return;
      // A thread still starting has no connection to close yet: it is ended. A ready one closes its own,
      // then is ended (its `stopped` reply).
      if (ready) {
        worker.postMessage({ stop: true } satisfies CheckpointRequest);
        let timer: ReturnType<typeof setTimeout> | undefined;
        const late = new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(true), STOP_WAIT_MILLIS);
        });
        const stuck = await Promise.race([exited.then(() => false), late]);
        clearTimeout(timer);
        if (!stuck) return;
      }
      await worker.terminate().catch(() => undefined);
      await exited;
    },
  };
}
