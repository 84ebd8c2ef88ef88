/**
 * The repository (repository.ts) on SQL: MySQL/MariaDB in production, SQLite embedded. Its constructor is the one
 * place that decides how each kind of statement runs (the rules: README.md in this folder): the hot reads and the
 * write transaction straight through the driver (run/reads.ts, run/writes.ts; the writes and their retries in
 * sql-writer.ts), the lists through the search runner (run/searches.ts, sql-lists.ts), the cold paths (tenants,
 * the prober's schedule) on knex. What it reads is mapped to the domain by rows.ts.
 */

import type { Knex } from "knex";
import { RegistryError, tenantExists, unavailable } from "../domain/errors.js";
import { INSTANCE_ID } from "../domain/upsert.js";
import type { Logger } from "../logger.js";
import { type ChangeLog, createChangeLog } from "./change-log.js";
import { migrateToLatest } from "./migrations/index.js";
import { createProbeSchedule } from "./probe-schedule.js";
import type { ReadContext, RunRead } from "./queries/reads.js";
import { readStatements } from "./queries/reads.js";
import { defaultPageMaxBytes } from "./queries/search.js";
import { tenants } from "./queries/tables.js";
import type { QueryContext } from "./queries/tenants.js";
import { findTenant, insertTenant, listTenants } from "./queries/tenants.js";
import type {
  AgentDefinitionRepository,
  Found,
  KeyedReads,
  ListQuery,
  ListResult,
  Page,
  PoolStats,
  ProbeSchedule,
  StoredDefinition,
  Tenant,
  TenantAdminStore,
  Work,
  WriteRetries,
  WriteTransaction,
} from "./repository.js";
import { oneOf, toDatabaseTimestamp, toTenant } from "./rows.js";
import type { Database, StorageOptions } from "./run/connection.js";
import { openDatabase } from "./run/connection.js";
import { isDuplicateKey, isNodeFailure } from "./run/driver-errors.js";
import { driverRunner, keyedReads, type KeyedReads as ReadsByKey } from "./run/reads.js";
import type { SearchLimits } from "./run/searches.js";
import { SqlLists } from "./sql-lists.js";
import { createSqlTenantAdmin, translate } from "./sql-tenant-admin.js";
import { defaultWriteBudgetMs, SqlWriter } from "./sql-writer.js";

// The defaults and bounds of storage's settings, for config.ts (the layers above see this module and
// repository.ts only).
export { defaultPageMaxBytes } from "./queries/search.js";
export type { StorageOptions } from "./run/connection.js";
export { MYSQL_POOL_SIZE, parseDatabaseUrl } from "./run/connection.js";
export type { SearchLimits } from "./run/searches.js";
export { defaultSearchMaxConcurrent, defaultSearchMaxPerTenant, defaultSearchTimeoutMs } from "./run/searches.js";
export { defaultSqliteCheckpointIntervalMs } from "./run/sqlite-checkpointer.js";
export { defaultSqliteSearchWorkers } from "./run/sqlite-search-worker.js";

/** Where the data lives, and the limits of the list's searches (`SEARCH_MAX_CONCURRENT`, `SEARCH_TIMEOUT_MS`). */
export interface RepositoryOptions extends StorageOptions {
  readonly search?: Omit<SearchLimits, "databaseTimeoutMs"> | undefined;
  /**
   * `PAGE_MAX_BYTES`, default defaultPageMaxBytes: the stored JSON bytes one
   * page of a list may hold. A page ends at `limit` definitions or at this
   * many bytes, whichever comes first (always at least one definition), and
   * its `next` position continues after its last one.
   */
  readonly pageMaxBytes?: number | undefined;
  /** Where the repair of MySQL's full-text texts says what it did (search-text.ts). */
  readonly logger?: Pick<Logger, "warn" | "info"> | undefined;
}

/**
 * How long ping() waits for its query: a healthy database answers in milliseconds; the bound keeps a probe from
 * hanging on a connection attempt (MySQL's connect timeout is 5 s) while leaving room for a busy pool.
 */
const pingTimeoutMs = 2_000;

/**
 * How long one statement of a migration may take on MySQL: migrations rewrite and index whole tables (0009 builds
 * three indexes over every definition, 0010 counts every term), which at a million definitions outlasts the
 * service's DATABASE_TIMEOUT_MS many times over.
 */
const migrationStatementMs = 60 * 60_000;

/** The process's change reader (change-reader.ts) and its replays' budget (byte-gate.ts), made beside it. */
export { createByteGate } from "./byte-gate.js";
export { createChangeReader } from "./change-reader.js";

/** The connections the change reader reads the log on (MySQL): one, for the process's one reader. */
const WATCH_POOL_SIZE = 1;

/**
 * Opens the database, brings its schema up to date and returns the repository. Throws `UNAVAILABLE` when the
 * database cannot be reached. On MySQL the migrations run on a pool of their own, closed when they are done, whose
 * statements may take migrationStatementMs; connecting still fails within the service's timeout. With a
 * `databaseWriteUrl` (MySQL), the write transactions, the tenants' creation, the prober's schedule and the
 * migrations go to its hosts, on a pool of their own, and everything else to `databaseUrl`'s.
 */
export async function createSqlRepository(options: RepositoryOptions): Promise<AgentDefinitionRepository> {
  const database = await openDatabase(options);
  const writeUrl = database.dialect === "mysql" ? options.databaseWriteUrl || undefined : undefined;
  const writer = writeUrl === undefined ? database : await openDatabase({ ...options, databaseUrl: writeUrl });
  // The change reader's one connection (MySQL): it reads the log once for every watcher of the process, every
  // WATCH_POLL_MS, and must not queue behind writers that hold the pool's connections while they wait for a
  // tenant's lock (with 64 writes in flight its polls waited up to 950 ms for a connection: BENCHMARKS.md,
  // "Watch (issue 20)"). Opened lazily: it connects at the first watch.
  const watching =
    database.dialect === "mysql" ? await openDatabase({ ...options, poolSize: WATCH_POOL_SIZE }) : undefined;
  // SQLite's reads by id and reference and the change log's on a connection of their own (issue 50): on the one
  // connection they waited for every write transaction (a ~1 MB definition's held it 0.3-2 s), while in WAL mode a
  // reader of another connection reads the last commit beside a writer.
  const reading = database.dialect === "sqlite" ? await openDatabase(options) : database;
  const close = async () => {
    await database.db.destroy().catch(() => undefined);
    if (reading !== database) await reading.db.destroy().catch(() => undefined);
    if (writer !== database) await writer.db.destroy().catch(() => undefined);
    await watching?.db.destroy().catch(() => undefined);
  };
  const migrating =
    database.dialect === "mysql"
      ? await openDatabase({
          ...options,
          databaseUrl: writeUrl ?? options.databaseUrl,
          statementTimeoutMs: migrationStatementMs,
        })
      : database;
  try {
    await migrateToLatest(migrating.db);
  } catch (error) {
    await close();
    throw translate(error);
  } finally {
    if (migrating !== database) await migrating.db.destroy().catch(() => undefined);
  }
  return new SqlRepository(
    database,
    writer,
    { ...options.search, databaseTimeoutMs: options.timeoutMs },
    {
      watching: watching ?? reading,
      reading,
      pageMaxBytes: options.pageMaxBytes ?? defaultPageMaxBytes,
      writeBudgetMs: options.timeoutMs ?? defaultWriteBudgetMs,
      logger: options.logger,
    },
  );
}

class SqlRepository implements AgentDefinitionRepository {
  readonly #db: Knex;
  /** The hot reads' and the probe's connections: #db, or (SQLite) a connection of their own beside the writer. */
  readonly #readDb: Knex;
  /** Where writes go: #db, or the pool of DATABASE_WRITE_URL (single-writer). */
  readonly #writeDb: Knex;
  readonly #context: QueryContext;
  /** The cold writes (a tenant's creation), on the writer. */
  readonly #writeContext: QueryContext;
  /** The hot reads: SQL built here, once, and run through the driver (run/reads.ts). */
  readonly #reads: ReadContext;
  /**
   * The reads by id and by reference id (a GET of either): on MySQL those asked while one is in flight
   * coalesced, one statement per tenant; on SQLite each its own statement (run/reads.ts).
   */
  readonly #byId: ReadsByKey;
  readonly #byReference: ReadsByKey;
  /** The write transactions, run again after what they lost (sql-writer.ts). */
  readonly #writer: SqlWriter;
  /** The list's searches and keyset pages (sql-lists.ts). */
  readonly #lists: SqlLists;
  readonly #dialect: Database["dialect"];
  #changeLog: ChangeLog | undefined;
  #probeSchedule: ProbeSchedule | undefined;
  /** Where the change log is read (createSqlRepository's `watching`): #db on SQLite. */
  readonly #watching: Knex;
  /** The ping in flight: concurrent pings share it, so probes never pile up queries on a slow database. */
  #ping: Promise<void> | undefined;
  /** The database hosts (DATABASE_URL may name several): what a read's node failure is tried on again. */
  readonly #hosts: number;
  readonly #tenantAdmin: TenantAdminStore; // tenant settings and provider keys, on the writer

  constructor(
    { db, dialect, hosts }: Database,
    writer: Database,
    searchLimits: SearchLimits,
    {
      watching,
      pageMaxBytes,
      writeBudgetMs,
      logger,
      reading,
    }: {
      watching: Database;
      /** The hot reads' connections: #db's, or (SQLite) a connection of their own. */
      reading: Database;
      pageMaxBytes: number;
      writeBudgetMs: number;
      logger: RepositoryOptions["logger"];
    },
  ) {
    this.#watching = watching.db;
    this.#hosts = hosts;
    this.#writer = new SqlWriter(writer, writeBudgetMs, logger);
    this.#db = db;
    this.#writeDb = writer.db;
    this.#context = { tx: db, dialect };
    this.#writeContext = { tx: writer.db, dialect };
    this.#readDb = reading.db;
    this.#reads = { run: driverRunner(reading.db, dialect), statements: readStatements(dialect) };
    const { byId, byReference } = keyedReads(this.#reads.run, dialect, this.#reads.statements);
    this.#byId = byId;
    this.#byReference = byReference;
    this.#lists = new SqlLists(db, dialect, searchLimits, {
      pageMaxBytes,
      texts: this.#writer.texts,
      guard: (read) => this.#guard(read),
    });
    this.#dialect = dialect;
    this.#tenantAdmin = createSqlTenantAdmin(writer.db, dialect);
  }

  write<T>(tenant: string, work: (tx: WriteTransaction) => Promise<T>): Promise<T> {
    return this.#writer.write(tenant, work);
  }

  probeSchedule(): ProbeSchedule {
    return (this.#probeSchedule ??= createProbeSchedule(this.#writeDb, this.#dialect, this.#readDb));
  }
  changeLog(): ChangeLog {
    // The polls' reads on their own connection (MySQL); compaction stays on the pool. A database that cannot be
    // reached, or a connection not had in time, is UNAVAILABLE (a watcher retries), as for every other read.
    const translating =
      (run: RunRead): RunRead =>
      async (sql, bindings) => {
        try {
          return await run(sql, bindings);
        } catch (error) {
          throw translate(error);
        }
      };
    this.#changeLog ??= createChangeLog(this.#db, this.#dialect, translating(this.#reads.run), {
      poll: translating(this.#watching === this.#db ? this.#reads.run : driverRunner(this.#watching, this.#dialect)),
    });
    return this.#changeLog;
  }

  async get(tenant: string, id: string): Promise<StoredDefinition | undefined> {
    return (await this.find(tenant, id)).stored;
  }

  async getNewestByReference(tenant: string, referenceId: string): Promise<StoredDefinition | undefined> {
    return (await this.findNewestByReference(tenant, referenceId)).stored;
  }

  async find(tenant: string, id: string): Promise<Found> {
    // An id we could not have issued (which also keeps non-ASCII out of a comparison with the
    // ASCII id column) is looked up as "", which no row has: the same one statement still
    // tells an unknown tenant from an unknown id.
    const rows = await this.#guard(() => this.#byId.read(tenant, INSTANCE_ID.test(id) ? id : ""));
    return oneOf(tenant, rows);
  }

  async findNewestByReference(tenant: string, referenceId: string): Promise<Found> {
    const rows = await this.#guard(() => this.#byReference.read(tenant, referenceId));
    return oneOf(tenant, rows);
  }

  listVersions(tenant: string, agentNumber: number, page: Page, work: Work = {}): Promise<ListResult> {
    return this.#lists.listVersions(tenant, agentNumber, page, work);
  }

  search(tenant: string, asked: ListQuery, work: Work = {}): Promise<ListResult> {
    return this.#lists.search(tenant, asked, work);
  }

  /**
   * Runs a read, turning connection failures into `UNAVAILABLE`. A read its node failed under is
   * tried again on the next host, once per other host (the pool moved there: run/connection.ts).
   */
  async #guard<T>(read: () => Promise<T>): Promise<T> {
    for (let failovers = this.#hosts - 1; ; failovers--) {
      try {
        return await read();
      } catch (error) {
        if (failovers > 0 && !(error instanceof RegistryError) && isNodeFailure(error)) continue;
        throw translate(error);
      }
    }
  }

  async getTenant(tenant: string): Promise<Tenant | undefined> {
    const row = await this.#guard(() => findTenant(this.#context, tenant));
    return row === undefined ? undefined : toTenant(row);
  }

  async createTenant(name: string, sequencePrefix: string | null): Promise<Tenant> {
    const createdAt = new Date();
    try {
      await insertTenant(this.#writeContext, {
        name,
        sequence_prefix: sequencePrefix,
        next_agent_number: 1,
        created_at: toDatabaseTimestamp(createdAt),
      });
    } catch (error) {
      if (isDuplicateKey(error)) throw tenantExists(name, error);
      throw translate(error);
    }
    return { name, sequencePrefix, nextAgentNumber: 1, createdAt };
  }

  async listTenants(): Promise<Tenant[]> {
    return (await this.#guard(() => listTenants(this.#context))).map(toTenant);
  }

  tenantAdmin(): TenantAdminStore {
    return this.#tenantAdmin;
  }

  async ping(): Promise<void> {
    // A row of a table, not `SELECT 1`: a Galera node out of the primary component answers SELECT 1
    // but refuses every query on a table (1047), and the probe must fail exactly while reads would.
    // On the reads' connection: on SQLite the writes' one is held by each write transaction whole, and the probe
    // answered a load balancer only between them (/healthz p99 147 ms beside four writers of ~1 MB).
    const query = (this.#ping ??= this.#guard(() => this.#readDb.raw(`SELECT 1 FROM ${tenants} LIMIT 1`))
      .then(
        () => undefined,
        (error: unknown) => {
          // Whatever stops it (a refused connection, a full pool, a node not ready) makes the database unusable.
          throw error instanceof RegistryError && error.code === "UNAVAILABLE" ? error : unavailable(error);
        },
      )
      .finally(() => {
        if (this.#ping === query) this.#ping = undefined;
      }));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        // A query that hangs (a server that stopped answering) is left behind, so the next ping tries afresh.
        if (this.#ping === query) this.#ping = undefined;
        reject(unavailable(new Error(`The database did not answer a ping within ${pingTimeoutMs} ms.`)));
      }, pingTimeoutMs);
    });
    try {
      await Promise.race([query, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  poolStats(): PoolStats {
    // knex's pool is tarn's; it exists from creation until destroy(). With a writer of its own, both pools.
    const pools = (this.#writeDb === this.#db ? [this.#db] : [this.#db, this.#writeDb]).map(
      (db) => db.client.pool as Partial<TarnPoolCounts> | undefined,
    );
    const sum = (count: (pool: Partial<TarnPoolCounts> | undefined) => number) =>
      pools.reduce((total, pool) => total + count(pool), 0);
    return {
      used: sum((pool) => pool?.numUsed?.() ?? 0),
      free: sum((pool) => pool?.numFree?.() ?? 0),
      pendingAcquires: sum((pool) => pool?.numPendingAcquires?.() ?? 0),
      max: sum((pool) => pool?.max ?? 0),
      searchesWaiting: this.#lists.waiting(),
    };
  }

  writeRetries(): WriteRetries {
    return this.#writer.writeRetries();
  }

  keyedReads(): KeyedReads {
    return { by_id: this.#byId.stats(), by_reference: this.#byReference.stats() };
  }

  async close(): Promise<void> {
    // The checkpoint thread and the search workers first: their connections end before the last one closes
    // the file (which checkpoints the WAL and removes it).
    await this.#writer.close();
    await this.#lists.close();
    await this.#db.destroy();
    if (this.#writeDb !== this.#db) await this.#writeDb.destroy();
    if (this.#watching !== this.#db) await this.#watching.destroy();
  }
}

/** The counters of a tarn pool that poolStats reads. */
interface TarnPoolCounts {
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
  readonly max: number;
}
