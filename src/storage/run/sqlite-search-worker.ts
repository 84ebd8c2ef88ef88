/**
 * SQLite search statements off the event loop. better-sqlite3 and
 * `node:sqlite` are synchronous, so a statement run on the main thread stops
 * every request of the process until it ends, and SQLite has no statement
 * time limit. Here each statement runs in a worker thread with its own
 * read-only connection to the same file (WAL lets readers run beside the
 * writer), and the caller is answered at the time limit, or when its signal
 * aborts, whatever the statement is doing.
 *
 * Neither driver can interrupt a running statement (no `sqlite3_interrupt`),
 * and `worker.terminate()` does not stop one either: measured on Node 20 and
 * Deno 2.9.6, a terminated worker's statement runs on to its end, burning its
 * core and holding its read snapshot (a WAL checkpoint stays busy) until then.
 * So the statements stop themselves: every costly search calls SEARCH_ALIVE
 * once per candidate row (queries/search.ts), and in a worker that function
 * throws once the pool has stored the statement's id in the memory it shares
 * with the worker, which the pool does when it answers the caller without the
 * statement's rows (the time limit, an aborted signal, close). The worker is
 * then free for the next statement at once. A statement that does not call
 * the function (none of the service's) runs on to its end in its busy worker,
 * counted against the pool's size; its rows are dropped. A statement's time
 * limit counts from when it is handed to the pool; only the wait for a worker
 * to start (tens of milliseconds) is not counted.
 *
 * The worker's entry (sqlite-search-thread.ts) is loaded beside this module:
 * compiled JavaScript from dist/ under `npm start`, TypeScript under Deno
 * (which runs it, and its imports, as the main thread's), and TypeScript
 * through tsx where the main thread itself runs from sources under Node
 * (vitest, `node --import tsx`, the bench): thread-entry.ts.
 */
import { Buffer } from "node:buffer";
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import { unavailable } from "../../domain/errors.js";
import type { SearchReply, SearchRequest, SearchWorkerData } from "./sqlite-search-thread.js";
import { threadEntry } from "./thread-entry.js";

/** The pool's size and time limit (README, `SEARCH_SQLITE_WORKERS` and `SEARCH_TIMEOUT_MS`). */
export interface SqliteSearchPoolOptions {
  /** Worker threads at most, each running one statement at a time; statements beyond them wait in line. */
  readonly workers: number;
  /** How long one statement may run before its worker is terminated, in milliseconds; 0 for no limit. */
  readonly timeoutMs: number;
}

/** Search statements on worker threads. */
export interface SqliteSearchPool {
  /**
   * Runs one SELECT and answers its rows, byte values as Buffers (as
   * better-sqlite3 answers them on the main thread). Rejects with a
   * SearchStatementTimeout past the time limit (counted from this call, less
   * the start of a worker; `timeoutMs`, when given, instead of the
   * pool's: what is left of a search's budget), with
   * `signal`'s reason when it aborts first, and with UNAVAILABLE when the pool
   * is closed or a worker cannot open the database.
   */
  run(sql: string, bindings: readonly unknown[], signal?: AbortSignal, timeoutMs?: number): Promise<unknown[]>;
  /**
   * Terminates every worker (one still in a statement ends with it); statements running or waiting are
   * answered UNAVAILABLE.
   */
  close(): Promise<void>;
}

/**
 * A statement not answered within the pool's time limit; run/searches.ts answers it as the MySQL servers'
 * timeouts are.
 */
export class SearchStatementTimeout extends Error {
  override readonly name = "SearchStatementTimeout";
  constructor(readonly timeoutMs: number) {
    super(`The search statement was not answered within ${timeoutMs} ms.`);
  }
}

/**
 * The default of `SEARCH_SQLITE_WORKERS`: one less than the cores (1 to 4), so
 * the event loop keeps a core while searches run. On 2 cores, at 80,000
 * definitions and 8 clients looping a costly `q`, one worker kept `/healthz`
 * p99 at 24 ms, two let it reach 165 ms (BENCHMARKS.md).
 */
export const defaultSqliteSearchWorkers = Math.max(1, Math.min(4, availableParallelism() - 1));

/** A statement waiting for, or running on, a worker. */
interface Job {
  readonly request: SearchRequest;
  /** Starts the time limit, once: when the statement reaches a worker, or waits for busy ones. */
  readonly startClock: () => void;
  /** Answers the caller, once: later answers (a reply after the deadline) are dropped. */
  readonly settle: (outcome: { rows: Record<string, unknown>[] } | { error: unknown }) => void;
}

/** A worker and the statement it runs. */
interface Slot {
  readonly worker: Worker;
  /** Shared with the worker: the id of a statement to stop (SearchWorkerData.stop). */
  readonly stop: Int32Array;
  /** False until its connection is open. */
  ready: boolean;
  /** The statement it runs, answered or not: the worker is busy until its reply comes. */
  job: Job | undefined;
}

/** Makes Buffers of the byte values a worker sent: structured cloning answers plain Uint8Arrays. */
function asBuffers(rows: Record<string, unknown>[]): Record<string, unknown>[] {
  for (const row of rows) {
    for (const [column, value] of Object.entries(row)) {
      if (value instanceof Uint8Array && !Buffer.isBuffer(value))
        row[column] = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    }
  }
  return rows;
}

/** An error a worker described, with its code, so driver-errors.ts classifies it as the driver's own. */
function rebuilt({ message, code }: { message: string; code?: string | undefined }): Error {
  return Object.assign(new Error(message), code === undefined ? {} : { code });
}

/**
 * Starts a pool of at most `options.workers` search workers on the SQLite
 * file `filename`. Workers start when statements need them and are kept
 * (unreferenced while idle, so an idle pool keeps no process alive) until close().
 */
export function createSqliteSearchPool(filename: string, options: SqliteSearchPoolOptions): SqliteSearchPool {
  if (!Number.isInteger(options.workers) || options.workers < 1)
    throw new Error(`A search pool needs a whole number of workers, at least 1, not ${options.workers}.`);
  return new WorkerPool(filename, options);
}

class WorkerPool implements SqliteSearchPool {
  readonly #filename: string;
  readonly #options: SqliteSearchPoolOptions;
  readonly #entry = threadEntry("sqlite-search-thread");
  readonly #slots = new Set<Slot>();
  /** The statements no worker runs yet, in the order they came. */
  readonly #waiting: Job[] = [];
  #closed = false;
  #lastId = 0;

  constructor(filename: string, options: SqliteSearchPoolOptions) {
    this.#filename = filename;
    this.#options = options;
  }

  run(
    sql: string,
    bindings: readonly unknown[],
    signal?: AbortSignal,
    timeoutMs = this.#options.timeoutMs,
  ): Promise<unknown[]> {
    if (this.#closed) return Promise.reject(unavailable(new Error("The search pool is closed.")));
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const request = { id: ++this.#lastId, sql, bindings };
      const stop = (job: Job, error: unknown) => this.#stop(job, error);
      this.#waiting.push(createJob(request, timeoutMs, signal, { resolve, reject }, stop));
      this.#dispatch();
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    const error = unavailable(new Error("The search pool is closed."));
    for (const job of this.#waiting.splice(0)) job.settle({ error });
    const ending: Promise<unknown>[] = [];
    for (const slot of [...this.#slots]) {
      // Node ends a thread only once its statement has returned: a busy one is told to stop its
      // statement, and left to end by itself (unreferenced, so it keeps no process alive).
      const busy = slot.job !== undefined;
      if (slot.job !== undefined) this.#stopRunning(slot.job);
      const ended = this.#drop(slot, error);
      if (busy) slot.worker.unref();
      else ending.push(ended);
    }
    await Promise.all(ending);
  }

  /** Answers the caller now, and stops the statement if a worker runs it (see the top of this file). */
  #stop(job: Job, error: unknown): void {
    const at = this.#waiting.indexOf(job);
    if (at >= 0) this.#waiting.splice(at, 1);
    job.settle({ error });
    this.#stopRunning(job);
  }

  /** Tells the worker running `job`, if one is, to stop it (sqlite-client.ts, SEARCH_ALIVE). */
  #stopRunning(job: Job): void {
    for (const slot of this.#slots) if (slot.job === job) Atomics.store(slot.stop, 0, job.request.id);
  }

  /** Forgets `slot` and ends its thread; answers its statement with `error` if it is still unanswered. */
  #drop(slot: Slot, error: unknown): Promise<unknown> {
    this.#slots.delete(slot);
    slot.job?.settle({ error });
    slot.job = undefined;
    return slot.worker.terminate().catch(() => undefined);
  }

  #spawn(): void {
    const stop = new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT);
    const worker = new Worker(this.#entry.source, {
      eval: this.#entry.eval,
      workerData: { filename: this.#filename, stop } satisfies SearchWorkerData,
    });
    const slot: Slot = { worker, stop: new Int32Array(stop), ready: false, job: undefined };
    this.#slots.add(slot);
    worker.on("message", (reply: SearchReply) => {
      if ("ready" in reply) {
        slot.ready = true;
        worker.unref();
      } else if (!slot.ready && "error" in reply) {
        // The connection could not be opened: the statements waiting would fail alike.
        void this.#drop(slot, undefined);
        const error = unavailable(rebuilt(reply.error));
        for (const job of this.#waiting.splice(0)) job.settle({ error });
      } else {
        const job = slot.job;
        slot.job = undefined;
        worker.unref();
        job?.settle("rows" in reply ? { rows: asBuffers(reply.rows) } : { error: rebuilt(reply.error) });
      }
      this.#dispatch();
    });
    worker.on("error", (error) => {
      if (!this.#slots.has(slot)) return;
      const starting = !slot.ready;
      void this.#drop(slot, unavailable(error));
      if (starting) for (const job of this.#waiting.splice(0)) job.settle({ error: unavailable(error) });
      this.#dispatch();
    });
    worker.on("exit", (code) => {
      // Ours end through #drop(), which forgets them first; any other exit is the worker's own.
      if (!this.#slots.has(slot)) return;
      void this.#drop(slot, unavailable(new Error(`A search worker exited with code ${code}.`)));
      this.#dispatch();
    });
  }

  /** Hands waiting statements to idle workers, and starts workers for the rest, up to the pool's size. */
  #dispatch(): void {
    if (this.#closed) return;
    for (const slot of this.#slots) {
      const job = slot.ready && slot.job === undefined ? this.#waiting.shift() : undefined;
      if (job === undefined) continue;
      slot.job = job;
      job.startClock();
      slot.worker.ref();
      slot.worker.postMessage(job.request);
    }
    const starting = () => [...this.#slots].filter((slot) => !slot.ready).length;
    const more = Math.min(this.#waiting.length - starting(), this.#options.workers - this.#slots.size);
    for (let left = more; left > 0; left--) this.#spawn();
    // What waits for busy workers only is on the clock; a worker's start is not counted.
    if (starting() === 0) for (const job of this.#waiting) job.startClock();
  }
}

/**
 * The job of one statement: `answer` is called once, by settle; its time limit (from startClock) and `signal`
 * (listened to from now) end it through `stop`.
 */
function createJob(
  request: SearchRequest,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  answer: { resolve(rows: unknown[]): void; reject(error: unknown): void },
  stop: (job: Job, error: unknown) => void,
): Job {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let settled = false;
  const onAbort = () => stop(job, signal?.reason);
  const job: Job = {
    request,
    startClock() {
      if (timer !== undefined || settled || timeoutMs === 0) return;
      timer = setTimeout(() => stop(job, new SearchStatementTimeout(timeoutMs)), Math.max(1, timeoutMs));
    },
    settle(outcome) {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      if ("rows" in outcome) answer.resolve(outcome.rows);
      else answer.reject(outcome.error);
    },
  };
  signal?.addEventListener("abort", onAbort, { once: true });
  return job;
}
