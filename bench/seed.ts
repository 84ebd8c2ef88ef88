/**
 * Fills the bench tenant with definitions fast: batches of multi-row inserts
 * straight into `agents`, `agent_definitions` and the search index's side
 * tables, instead of one upsert transaction per definition. The rows are the
 * ones the service writes for a new agent (seed-rows.ts, by the storage's own
 * functions), made in worker threads while the database writes the batch
 * before; the run checks that a GET of a seeded row answers that document
 * (see `expected`). The counters' per-row triggers (and on SQLite the
 * terms' lookup index) are suspended while the batches are written: each
 * batch counts its definitions and terms itself, and the index is built once
 * at the end (bulk-load.ts). On SQLite each statement text is prepared once;
 * on MySQL the term rows go in by LOAD DATA, each batch's foreign keys are
 * not checked row by row, and two batches are written at once, committing in
 * order (insertBatch).
 */
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { JsonValue } from "@bufbuild/protobuf";
import { build } from "esbuild";
import type { Knex } from "knex";
import { toDatabaseTimestamp } from "../src/storage/rows.js";
import { type Dialect, openDatabase } from "../src/storage/run/connection.js";
import type { WriteBinding } from "../src/storage/run/writes.js";
import {
  type BulkLoad,
  checkAfterBulkLoad,
  fastSqliteConnection,
  restoreInterrupted,
  suspendForBulkLoad,
} from "./bulk-load.js";
import { type Batch, type BatchSpec, SEEDED_NAME_PREFIX, sortedIds } from "./seed-rows.js";

export { ONE_PERCENT_SECOND_WORD, ONE_PERCENT_TAG, ONE_PERCENT_WORD, SEEDED_NAME_PREFIX } from "./seed-rows.js";

/**
 * Rows per batch (one transaction): about 4 MB of documents (JSON, and binary written as hex), well under
 * MariaDB's default 16 MB max_allowed_packet.
 */
const batchSize = 1000;
/** Out of a worker a Buffer arrives as a Uint8Array, which the SQLite driver would not bind as bytes. */
function asBuffer(value: WriteBinding): Knex.Value {
  const bytes: unknown = value;
  return bytes instanceof Uint8Array && !Buffer.isBuffer(bytes)
    ? Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
    : value;
}

/** The driver's SQLite connection (better-sqlite3; node:sqlite under Deno), as far as the seeding uses it. */
interface SqliteConnection {
  prepare(sql: string): { run(...bindings: unknown[]): unknown };
}

const prepared = new WeakMap<SqliteConnection, Map<string, ReturnType<SqliteConnection["prepare"]>>>();

/**
 * Runs statements on the SQLite connection of `tx`, each text prepared once per connection: knex.raw
 * prepares a statement at every run, and preparing a 1,000-row INSERT took about as long as running it
 * (1.3 ms and 1.5 ms in memory); a batch's ~58 term INSERTs share one text.
 */
async function preparedOnce(tx: Knex.Transaction): Promise<(sql: string, bindings: Knex.Value[]) => void> {
  // A transaction's client hands out the transaction's own connection.
  const connection = (await tx.client.acquireConnection()) as SqliteConnection;
  let statements = prepared.get(connection);
  if (statements === undefined) prepared.set(connection, (statements = new Map()));
  const cache = statements;
  return (sql, bindings) => {
    let statement = cache.get(sql);
    if (statement === undefined) cache.set(sql, (statement = connection.prepare(sql)));
    statement.run(...bindings);
  };
}

/** The driver's MySQL connection (mysql2), as far as the seeding uses it. */
interface MysqlConnection {
  query(
    options: { sql: string; infileStreamFactory: () => Readable },
    callback: (error: Error | null, result: { affectedRows: number; warningStatus: number }) => void,
  ): unknown;
}

/**
 * Runs a LOAD DATA LOCAL INFILE of `infile.text` on the MySQL connection of `tx` (knex.raw cannot hand
 * mysql2 the file). LOCAL turns a row the server cannot take into a warning and goes on, so any warning, or
 * a row count other than the file's, fails the batch.
 */
async function loadInfile(tx: Knex.Transaction, sql: string, infile: { text: string; rows: number }): Promise<void> {
  const connection = (await tx.client.acquireConnection()) as MysqlConnection;
  const bytes = Buffer.from(infile.text, "utf8");
  // In packets of at most 1 MiB, well within the server's max_allowed_packet.
  const chunks = function* () {
    for (let at = 0; at < bytes.length; at += 1 << 20) yield bytes.subarray(at, at + (1 << 20));
  };
  const result = await new Promise<{ affectedRows: number; warningStatus: number }>((resolve, reject) =>
    connection.query({ sql, infileStreamFactory: () => Readable.from(chunks()) }, (error, answer) =>
      error === null ? resolve(answer) : reject(error),
    ),
  );
  if (result.affectedRows !== infile.rows || result.warningStatus !== 0)
    throw new Error(
      `LOAD DATA wrote ${result.affectedRows} of ${infile.rows} rows with ${result.warningStatus} warnings: ${sql}`,
    );
}

/** How many of the agents numbered 1 to `n` carry the 1 % markers. */
export function onePercentOf(n: number): number {
  return Math.floor(n / 100);
}

/** The seeded agents whose definitions the update scenarios rewrite. */
const UPDATE_POOL = { from: 21, to: 900 };

export interface Seeder {
  /** Definitions in the tenant now. */
  count(): Promise<number>;
  /** Adds definitions until the tenant has `target`; resolves with how many were added. */
  topUp(target: number): Promise<number>;
  /** A seeded definition and the JSON a GET of it must answer. */
  expected(): { readonly id: string; readonly json: JsonValue } | undefined;
  /**
   * Up to `n` random ids to read, and up to `n` random names of seeded
   * definitions to update. The names come from agents 21 to 900, the ids from
   * the others: the floor's updates store the body without derived ids, so
   * rows it updated are kept out of what later reads and list pages see (the
   * first page holds agents 1 to 20, a last page the newest).
   */
  sample(n: number): Promise<{ ids: string[]; references: string[]; names: string[] }>;
  /**
   * Deletes the definitions and agents the create scenarios made (their names start with `prefix`), so the
   * next size starts exact.
   */
  removeCreated(prefix: string): Promise<number>;
  close(): Promise<void>;
}

const scratch = fileURLToPath(new URL("./.scratch/", import.meta.url));

/**
 * seed-worker.ts and what it imports, bundled into one JavaScript file by esbuild (tsx's own compiler): on
 * Node 20 a worker thread cannot load TypeScript, not even with `--import tsx`. Resolves with the file and
 * how to remove it.
 */
async function bundleWorker(): Promise<{ file: string; remove(): Promise<void> }> {
  // Beside the sources (bench/.scratch, ignored by git), so the bundle finds the packages in node_modules.
  await mkdir(scratch, { recursive: true });
  const dir = await mkdtemp(join(scratch, "seed-worker-"));
  const file = join(dir, "seed-worker.mjs");
  await build({
    entryPoints: [fileURLToPath(new URL("./seed-worker.ts", import.meta.url))],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile: file,
    logLevel: "error",
    packages: "external",
  });
  return { file, remove: () => rm(dir, { recursive: true, force: true }) };
}

/**
 * Threads that make batches (seed-rows.ts), each answering its batches in the order sent. Started with
 * tsx's loader, as the bench (and vitest) run TypeScript.
 */
class BatchMakers {
  readonly #workers: { worker: Worker; waiting: { resolve(b: Batch): void; reject(e: Error): void }[] }[] = [];
  #turn = 0;

  constructor(script: string, count: number) {
    for (let i = 0; i < count; i++) {
      const worker = new Worker(script);
      const entry = { worker, waiting: [] as { resolve(b: Batch): void; reject(e: Error): void }[] };
      worker.on("message", (message: { batch?: Batch; error?: string }) => {
        const waiter = entry.waiting.shift();
        if (message.batch !== undefined) waiter?.resolve(message.batch);
        else waiter?.reject(new Error(`A seeding worker failed: ${message.error}`));
      });
      worker.on("error", (error) => {
        for (const waiter of entry.waiting.splice(0)) waiter.reject(error);
      });
      this.#workers.push(entry);
    }
  }

  make(spec: BatchSpec): Promise<Batch> {
    const entry = this.#workers[this.#turn++ % this.#workers.length]!;
    return new Promise((resolve, reject) => {
      entry.waiting.push({ resolve, reject });
      entry.worker.postMessage(spec);
    });
  }

  async close(): Promise<void> {
    await Promise.all(this.#workers.map(({ worker }) => worker.terminate()));
  }
}

export async function openSeeder(options: {
  readonly databaseUrl: string | undefined;
  readonly dataDir: string;
  readonly tenant: string;
  /** Threads making rows; default: one per core but one. */
  readonly makers?: number;
  /** MySQL: batches written at once, each on a connection of its own; default 2 (SQLite: always 1). */
  readonly writers?: number;
}): Promise<Seeder> {
  const { db, dialect } = await openDatabase({
    databaseUrl: options.databaseUrl,
    dataDir: options.dataDir,
    // A batch's agent_definitions INSERT is ~6 MB of SQL: on a loaded machine it outlived the service's 10 s,
    // and the driver dropped the connection in the middle of the seeding. Counting a million's 58 million
    // term rows afterwards (checkAfterBulkLoad) is one statement of tens of seconds on a loaded machine.
    statementTimeoutMs: 3_600_000,
  });
  if (dialect === "sqlite") await fastSqliteConnection(db);
  const tenant = options.tenant;
  let last: { id: string; json: JsonValue } | undefined;

  const count = async (): Promise<number> => {
    const row = (await db("agent_definitions").where({ tenant }).count({ total: "*" }).first()) as
      | { total: number | string }
      | undefined;
    return Number(row?.total ?? 0);
  };

  const maxSeq = async (tx: Knex | Knex.Transaction): Promise<number> =>
    Number(((await tx("agent_definitions").max({ m: "seq" }).first()) as { m: number | string | null }).m ?? 0);
  const newestAgent = async (tx: Knex | Knex.Transaction): Promise<number> =>
    Number(
      ((await tx("agents").where({ tenant }).max({ m: "number" }).first()) as { m: number | string | null }).m ?? 0,
    );

  /** Where the writing's time goes, for the summary of a top-up. */
  const spent = new Map<string, number>();
  const timed = async <T>(what: string, work: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await work();
    } finally {
      spent.set(what, (spent.get(what) ?? 0) + performance.now() - t0);
    }
  };

  /**
   * The seeding's rows (and their removal) change what the tenant's reads answer, so the tenant's revision moves,
   * as every write's does: a running service's totals kept by revision (src/storage/counted-totals.ts) must not
   * outlive them.
   */
  const moveRevision = async (tx: Knex.Transaction): Promise<void> => {
    await tx.raw(
      `INSERT INTO tenant_revisions (tenant, revision) VALUES (?, 1) ${
        dialect === "mysql" ? "ON DUPLICATE KEY UPDATE" : "ON CONFLICT (tenant) DO UPDATE SET"
      } revision = revision + 1`,
      [tenant],
    );
  };

  /**
   * Moves the tenant's next agent number past its newest agent, if it is not already: after the batches of a
   * top-up, or of one that died before it could (the batches write the agents, not the number; insertBatch).
   */
  const numberAfterNewest = async (): Promise<void> => {
    await db.transaction(async (tx) => {
      const { next_agent_number: next } = await lockTenant(tx, dialect, tenant);
      const newest = await newestAgent(tx);
      if (Number(next) <= newest)
        await tx("tenants")
          .where({ name: tenant })
          .update({ next_agent_number: newest + 1 });
    });
  };

  /**
   * Writes one batch in a transaction of its own. Its rows go in while the batch before it may still be
   * writing (MySQL: `writers` at once); then, once that one has committed, it counts what it wrote and
   * commits. Batches commit in order, so a seeding that dies leaves its first batches whole and nothing
   * after them, as with one writer. The tenant's next agent number is moved once, after the last batch
   * (topUp): updating the tenant's row here would wait for every later batch's COMMIT (their agents' foreign
   * key holds a shared lock on it) while they wait for this one's.
   */
  const insertBatch = async (batch: Batch, bulk: BulkLoad, previous: Promise<void>): Promise<void> => {
    const { first, n, seq } = batch;
    await db.transaction(async (tx) => {
      // MySQL: the batch's foreign keys are not checked row by row (each of its 58,000 term rows looked its
      // definition up): the rows are made from the batch's own seq range, written by the statement before,
      // and agents by its own numbers, as a dump's reload trusts its rows. Set back before COMMIT, on the
      // transaction's connection; the keys themselves stay (checkAfterBulkLoad).
      if (dialect === "mysql") await tx.raw("SET SESSION foreign_key_checks = 0");
      // agents, agent_definitions, then the side rows the service's write path makes (seed-rows.ts).
      const run = dialect === "sqlite" ? await preparedOnce(tx) : undefined;
      for (const { what, sql, bindings, infile } of batch.statements)
        await timed(what, async () => {
          if (infile !== undefined) await loadInfile(tx, sql, infile);
          else if (bindings === undefined) await tx.raw(sql);
          else if (run !== undefined) run(sql, bindings.map(asBuffer));
          else await tx.raw(sql, bindings.map(asBuffer));
        });
      // The batch before has committed; if it failed, this one fails before anything of it commits.
      await previous;
      // seq and agent numbers are given explicitly (MySQL moves its AUTO_INCREMENT past seq), made for the
      // ones after the newest: nothing else writes while the bench seeds, and if something did, its rows
      // would clash with ours or sit above them.
      const newest = await maxSeq(tx);
      if (newest !== seq + n - 1)
        throw new Error(`The newest seq is ${newest} after writing ${seq} to ${seq + n - 1}.`);
      const agent = await newestAgent(tx);
      if (agent !== first + n - 1)
        throw new Error(`The newest agent number is ${agent} after writing ${first} to ${first + n - 1}.`);
      // The counters the suspended triggers would have moved row by row (bulk-load.ts).
      await timed("counts", () => bulk.count(tx, seq, seq + n));
      await moveRevision(tx);
      if (dialect === "mysql") await tx.raw("SET SESSION foreign_key_checks = 1");
    });
    last = batch.sample;
  };

  return {
    count,
    async topUp(target) {
      // Even when nothing is added: a bench database must not be measured without what a seeding that died
      // left suspended (its lookup index).
      const remade = await restoreInterrupted(db, dialect);
      if (remade.length > 0) {
        console.error(`[seed] made again what a seeding that died left out: ${remade.join(", ")}`);
        await numberAfterNewest();
      }
      const before = await count();
      if (before >= target) return 0;
      const sequence = await lockTenant(db, dialect, tenant);
      const now = toDatabaseTimestamp(new Date());
      let made = 0;
      let next = Number(sequence.next_agent_number);
      let seq = (await maxSeq(db)) + 1;
      const ids = sortedIds(target - before);
      const spec = (): BatchSpec | undefined => {
        const n = Math.min(batchSize, target - before - made);
        if (n <= 0) return undefined;
        const batch = {
          tenant,
          prefix: sequence.sequence_prefix,
          first: next,
          n,
          seq,
          ids: ids.slice(made, made + n),
          now,
          dialect,
        };
        made += n;
        next += n;
        seq += n;
        return batch;
      };
      // First: it refuses a database that is not the bench's own, before anything is made or written.
      const bulk = await suspendForBulkLoad(db, dialect, options);
      // One core is left to the thread that writes (SQLite runs in it) or to the database server.
      const threads = options.makers ?? Math.max(1, availableParallelism() - 1);
      // MySQL: two batches written at once, so the server works on two connections while this process makes
      // rows (one kept mariadbd at ~95 % of one core and this process at ~55 %; BENCHMARKS.md). SQLite has one
      // writer.
      const writers = dialect === "mysql" ? (options.writers ?? 2) : 1;
      const script = await bundleWorker().catch(async (error: unknown) => {
        await bulk.restore();
        throw error;
      });
      const makers = new BatchMakers(script.file, threads);
      const t0 = performance.now();
      /** Time with at least one batch being written (the batches overlap: their statements' times add up to more). */
      let writing = 0;
      let active = 0;
      let activeSince = 0;
      let written = 0;
      let restoring = 0;
      // Two batches per thread in the making while the database writes the oldest.
      const making: Promise<Batch>[] = [];
      /** The batches being written, oldest first; each commits after the one before it. */
      const inFlight: Promise<void>[] = [];
      let previous: Promise<void> = Promise.resolve();
      try {
        for (;;) {
          for (let s = making.length < 2 * threads ? spec() : undefined; s !== undefined; ) {
            const batch = makers.make(s);
            // Not left unhandled while earlier batches are written; awaited (and rethrown) in turn.
            batch.catch(() => undefined);
            making.push(batch);
            s = making.length < 2 * threads ? spec() : undefined;
          }
          const batch = await making.shift();
          if (batch === undefined) break;
          // At most `writers` batches at once: the next one waits for the oldest's COMMIT (and its failure).
          if (inFlight.length >= writers) await inFlight.shift();
          if (active++ === 0) activeSince = performance.now();
          const committed = insertBatch(batch, bulk, previous).finally(() => {
            if (--active === 0) writing += performance.now() - activeSince;
          });
          const counted = committed.then(() => {
            written += batch.n;
            // A million takes a while: say how it goes.
            if (written % 50_000 < batch.n && written >= 50_000)
              console.error(`[seed] ${written} of ${target - before} definitions written`);
          });
          // Neither is left unhandled while the loop waits for the makers: a failure is rethrown when inFlight
          // is awaited, and by the next batch before its COMMIT.
          committed.catch(() => undefined);
          counted.catch(() => undefined);
          inFlight.push(counted);
          previous = committed;
        }
        await Promise.all(inFlight);
      } finally {
        await Promise.allSettled([...making, ...inFlight]);
        await makers.close();
        await script.remove();
        // Once, for every batch that committed (insertBatch says why not in each).
        await numberAfterNewest();
        const t2 = performance.now();
        await bulk.restore();
        restoring = performance.now() - t2;
      }
      const t3 = performance.now();
      await checkAfterBulkLoad(db, dialect, tenant);
      const checking = performance.now() - t3;
      const parts = [...spent].map(([what, ms]) => `${what} ${(ms / 1000).toFixed(1)} s`).join(", ");
      spent.clear();
      const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
      console.error(
        `[seed] ${written} definitions in ${s(performance.now() - t0)}: ${s(writing)} writing, ${writers} ` +
          `batch${writers === 1 ? "" : "es"} at a time (statements, summed over the batches: ${parts}; the rest: ` +
          `checks, commits, waiting for the batch before), ${s(restoring)} making the triggers (and index) again, ` +
          `${s(checking)} checking the schema and counters`,
      );
      return written;
    },
    expected: () => last,
    async sample(n) {
      const rows = (await db("agent_definitions as d")
        .join("agents as a", (on) => on.on("a.tenant", "d.tenant").andOn("a.number", "d.agent_number"))
        .where("d.tenant", tenant)
        .select(["d.id as id", "d.name as name", "a.reference_id as reference"])) as {
        id: string;
        name: string;
        reference: string;
      }[];
      const pick = <T>(items: T[]): T[] => {
        const copy = [...items];
        for (let i = copy.length - 1; i > 0; i--) {
          const j = Math.floor(Math.random() * (i + 1));
          [copy[i], copy[j]] = [copy[j]!, copy[i]!];
        }
        return copy.slice(0, n);
      };
      const inPool = (name: string): boolean => {
        if (!name.startsWith(SEEDED_NAME_PREFIX)) return false;
        const number = Number(name.slice(SEEDED_NAME_PREFIX.length));
        return number >= UPDATE_POOL.from && number <= UPDATE_POOL.to;
      };
      const readable = rows.filter((r) => !inPool(r.name));
      const read = pick(readable.length >= 20 ? readable : rows);
      return {
        ids: read.map((r) => r.id),
        // The same definitions' agents: each the newest (the only) version of its agent.
        references: read.map((r) => r.reference),
        names: pick(rows.filter((r) => inPool(r.name)).map((r) => r.name)),
      };
    },
    async removeCreated(prefix) {
      return db.transaction(async (tx) => {
        await lockTenant(tx, dialect, tenant);
        const created = tx("agents").select("number").where({ tenant }).andWhere("name", "like", `${prefix}%`);
        const removed = await tx("agent_definitions").where({ tenant }).whereIn("agent_number", created).delete();
        await tx("agents").where({ tenant }).andWhere("name", "like", `${prefix}%`).delete();
        if (removed > 0) await moveRevision(tx);
        // The created agents were the newest, so numbering goes on from the newest left: no gaps.
        const newest = (await tx("agents").where({ tenant }).max({ m: "number" }).first()) as
          | { m: number | string | null }
          | undefined;
        await tx("tenants")
          .where({ name: tenant })
          .update({ next_agent_number: Number(newest?.m ?? 0) + 1 });
        return removed;
      });
    },
    close: () => db.destroy(),
  };
}

/**
 * The tenant's sequence row; locked on MySQL inside a transaction, so a seeding batch takes numbers as the
 * service does.
 */
async function lockTenant(
  tx: Knex | Knex.Transaction,
  dialect: Dialect,
  tenant: string,
): Promise<{ sequence_prefix: string; next_agent_number: number | string }> {
  const query = tx("tenants").select(["sequence_prefix", "next_agent_number"]).where({ name: tenant });
  if (dialect === "mysql" && "commit" in tx) query.forUpdate();
  const row = (await query.first()) as
    | { sequence_prefix: string | null; next_agent_number: number | string }
    | undefined;
  if (row?.sequence_prefix == null)
    throw new Error(`The bench tenant "${tenant}" is missing or has no agent id sequence.`);
  return { sequence_prefix: row.sequence_prefix, next_agent_number: row.next_agent_number };
}
