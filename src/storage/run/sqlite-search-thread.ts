/**
 * The entry of one search worker thread (sqlite-search-worker.ts starts it):
 * opens its own read-only connection to the SQLite file named in its
 * workerData, says it is ready (or why it is not), then runs one statement
 * per message and posts back its rows, or the error's message and code.
 *
 * The stored encodings come back as bytes: their ArrayBuffers are moved to
 * the main thread (transferred, not copied), which makes Buffers of them again.
 */
import { parentPort, workerData } from "node:worker_threads";
import { SEARCH_ALIVE } from "../queries/sql-functions.js";
import { type SqliteDatabase, sqliteDriver } from "./sqlite-client.js";

/** What the pool sends: one statement, numbered (from 1) so that a stop names it alone. */
export interface SearchRequest {
  readonly id: number;
  readonly sql: string;
  readonly bindings: readonly unknown[];
}

/** What the worker answers: readiness once, then one answer per request. */
export type SearchReply =
  | { readonly ready: true }
  | { readonly rows: Record<string, unknown>[] }
  | { readonly error: { readonly message: string; readonly code?: string | undefined } };

/** The worker's data: the database file, and where the pool writes the id of a statement to stop. */
export interface SearchWorkerData {
  readonly filename: string;
  /** An Int32Array's memory, shared: the pool stores a statement's id in it once its caller is answered. */
  readonly stop: SharedArrayBuffer;
}

/** The message of the error that ends a stopped statement (the pool has answered its caller already). */
export const STOPPED = "search statement stopped";

if (parentPort === null)
  throw new Error("sqlite-search-thread runs as a worker thread (sqlite-search-worker.ts starts it).");
const port = parentPort;

/** An error as the main thread rebuilds it: its message and SQLite code (driver-errors.ts classifies by code). */
function described(error: unknown): Extract<SearchReply, { error: unknown }> {
  const { message, code } = error as { message?: unknown; code?: unknown };
  return { error: { message: String(message ?? error), code: typeof code === "string" ? code : undefined } };
}

/** The ArrayBuffers of the rows' byte values, each once, to transfer: copied first where a value shares its buffer. */
function transferable(rows: Record<string, unknown>[]): ArrayBuffer[] {
  const buffers = new Set<ArrayBuffer>();
  for (const row of rows) {
    for (const [column, value] of Object.entries(row)) {
      if (!(value instanceof Uint8Array)) continue;
      let bytes = value;
      if (
        bytes.byteOffset !== 0 ||
        bytes.byteLength !== bytes.buffer.byteLength ||
        buffers.has(bytes.buffer as ArrayBuffer) ||
        !(bytes.buffer instanceof ArrayBuffer)
      ) {
        bytes = Uint8Array.prototype.slice.call(value);
        row[column] = bytes;
      }
      buffers.add(bytes.buffer as ArrayBuffer);
    }
  }
  return [...buffers];
}

/** The id of the statement running; 0 between statements. */
let running = 0;

/**
 * The read-only connection, or undefined (and the reason posted, and the thread left to end) when it cannot
 * be opened.
 */
function open(): SqliteDatabase | undefined {
  try {
    const Database = sqliteDriver();
    const db = new Database((workerData as SearchWorkerData).filename, { readonly: true, fileMustExist: true });
    // Readers of a WAL database rarely wait; when they do (another process recovering the WAL), briefly.
    db.pragma("busy_timeout = 5000");
    // The statement running throws at its next candidate row once the pool names it (sqlite-client.ts, SEARCH_ALIVE).
    const stop = new Int32Array((workerData as SearchWorkerData).stop);
    db.function(SEARCH_ALIVE, { deterministic: false }, () => {
      if (Atomics.load(stop, 0) === running) throw new Error(STOPPED);
      return 1;
    });
    return db;
  } catch (error) {
    port.postMessage(described(error) satisfies SearchReply);
    port.close();
    return undefined;
  }
}

const db = open();
if (db !== undefined) {
  port.on("message", ({ id, sql, bindings }: SearchRequest) => {
    running = id;
    let reply: SearchReply;
    let transfer: ArrayBuffer[] = [];
    try {
      // iterate(), not all(): under Deno only iterate() ends at the error SEARCH_ALIVE throws (sqlite-client.ts).
      const rows = Array.from(db.prepare(sql).iterate(bindings)) as Record<string, unknown>[];
      transfer = transferable(rows);
      reply = { rows };
    } catch (error) {
      reply = described(error);
    }
    running = 0;
    port.postMessage(reply, transfer);
  });
  port.postMessage({ ready: true } satisfies SearchReply);
}
