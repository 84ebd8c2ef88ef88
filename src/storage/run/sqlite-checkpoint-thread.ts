/**
 * The entry of the WAL checkpoint thread (sqlite-checkpointer.ts starts it):
 * opens its own read-write connection to the SQLite file named in its
 * workerData, says it is ready (with the page size), then runs
 * `PRAGMA wal_checkpoint(PASSIVE)` every `intervalMs` and whenever the
 * main thread asks, and posts what each found. On `stop` it closes its
 * connection and says so; the main thread then ends the thread (Deno's
 * `parentPort` has no `close()`, so the thread cannot end itself alike on
 * both runtimes).
 *
 * PASSIVE never waits and never makes anyone wait: it copies into the
 * database file the WAL frames no reader still needs, beside the writer and
 * the readers, and syncs the file (synchronous=FULL, as the writer's). The
 * modes that wait (FULL, RESTART, TRUNCATE) take the writer's lock while they
 * run, so the main thread's next write would sleep in SQLite's busy handler,
 * synchronously: they are not used.
 */
import { parentPort, workerData } from "node:worker_threads";
import { type SqliteDatabase, sqliteDriver } from "./sqlite-client.js";

/** The thread's data: the database file and how often to checkpoint. */
export interface CheckpointWorkerData {
  readonly filename: string;
  readonly intervalMs: number;
}

/** What the main thread sends: a checkpoint now (numbered, its answer carries the number), or stop. */
export type CheckpointRequest = { readonly checkpoint: number } | { readonly stop: true };

/** What one checkpoint found: `PRAGMA wal_checkpoint`'s row, and the page size to turn frames into bytes. */
export interface CheckpointResult {
  /** 1 when the checkpoint could not run (another checkpoint held its lock). */
  readonly busy: number;
  /** Frames in the WAL since it was last started over. */
  readonly log: number;
  /** Of those, the frames now copied into the database file. */
  readonly checkpointed: number;
}

/** What the thread answers: readiness once (or why not), one result per checkpoint, and its connection closed. */
export type CheckpointReply =
  | { readonly ready: true; readonly pageSize: number }
  | { readonly stopped: true }
  | { readonly result: CheckpointResult; readonly checkpoint?: number | undefined }
  | { readonly error: { readonly message: string; readonly code?: string | undefined } };

if (parentPort === null)
  throw new Error("sqlite-checkpoint-thread runs as a worker thread (sqlite-checkpointer.ts starts it).");
const port = parentPort;

function described(error: unknown): Extract<CheckpointReply, { error: unknown }> {
  const { message, code } = error as { message?: unknown; code?: unknown };
  return { error: { message: String(message ?? error), code: typeof code === "string" ? code : undefined } };
}

function open(): SqliteDatabase | undefined {
  try {
    const Database = sqliteDriver();
    const db = new Database((workerData as CheckpointWorkerData).filename, { fileMustExist: true });
    // Opening reads the schema; another process recovering the WAL makes that wait, briefly (off the loop).
    db.pragma("busy_timeout = 5000");
    // The checkpoint syncs the database file before the WAL may be started over: as durable as the writer's.
    db.pragma("synchronous = FULL");
    // This connection never commits anything of its own, so it never checkpoints on its own either.
    db.pragma("wal_autocheckpoint = 0");
    return db;
  } catch (error) {
    // The main thread ends the thread.
    port.postMessage(described(error) satisfies CheckpointReply);
    return undefined;
  }
}

const db = open();
if (db !== undefined) {
  const checkpoint = (): CheckpointReply => {
    try {
      const [row] = db.pragma("wal_checkpoint(PASSIVE)") as Array<Record<string, number | bigint>>;
      return {
        result: {
          busy: Number(row?.busy ?? 0),
          log: Number(row?.log ?? 0),
          checkpointed: Number(row?.checkpointed ?? 0),
        },
      };
    } catch (error) {
      return described(error);
    }
  };
  const timer = setInterval(() => port.postMessage(checkpoint()), (workerData as CheckpointWorkerData).intervalMs);
  port.on("message", (request: CheckpointRequest) => {
    if ("stop" in request) {
      clearInterval(timer);
      db.close();
      port.postMessage({ stopped: true } satisfies CheckpointReply);
      return;
    }
    const reply = checkpoint();
    port.postMessage("result" in reply ? { ...reply, checkpoint: request.checkpoint } : reply);
  });
  const [{ page_size: pageSize } = { page_size: 4096 }] = db.pragma("page_size") as Array<{ page_size: number }>;
  port.postMessage({ ready: true, pageSize: Number(pageSize) } satisfies CheckpointReply);
}
