/**
 * The repository (repository.ts) on SQL: MySQL/MariaDB in production, SQLite
 * embedded. Its constructor is the one place that decides how each kind of
 * statement runs (the rules: README.md in this folder): the hot reads and the
 * write transaction straight through the driver (run/reads.ts, run/writes.ts),
 * the lists through the search runner (run/searches.ts), the cold paths
 * (tenants) on knex. What it reads is mapped to the domain by rows.ts.
 */

import type { Knex } from "knex";
import {
  outcomeUnknown,
  RegistryError,
  tenantExists,
  tenantNotFound,
  unavailable,
  writeConflict,
} from "../domain/errors.js";
import type { Logger } from "../logger.js";
import { type ChangeLog, createChangeLog } from "./change-log.js";
import { CountedTotals } from "./counted-totals.js";
import { migrateToLatest } from "./migrations/index.js";
import type { ReadContext, RunRead } from "./queries/reads.js";
import { readById, readNewestByReference, readStatements } from "./queries/reads.js";
import {
  buildSearch,
  buildVersions,
  defaultPageMaxBytes,
  inSearchOrder,
  isBounded,
  needsWordPlan,
  orderValueOf,
  planWords,
  resolveWords,
  type SearchRow,
  wordPlanOf,
} from "./queries/search.js";
import { tenants } from "./queries/tables.js";
import type { QueryContext } from "./queries/tenants.js";
import { findTenant, insertTenant, listTenants } from "./queries/tenants.js";
import type { WriteContext, WriteStatements } from "./queries/writes.js";
import { findTenantIn, writeStatements } from "./queries/writes.js";
import type {
  AgentDefinitionRepository,
  Found,
  KeyedReads,
  ListQuery,
  ListResult,
  Page,
  PoolStats,
  StoredDefinition,
  Tenant,
  Work,
  WriteRetries,
  WriteTenant,
  WriteTransaction,
} from "./repository.js";
import type { DefinitionReadRow } from "./rows.js";
import { fromDatabaseInteger, toDatabaseTimestamp, toStoredDefinition, toTenant } from "./rows.js";
import { reloadTriggers, TriggerReloads } from "./run/broken-triggers.js";
import type { Database, StorageOptions } from "./run/connection.js";
import { openDatabase } from "./run/connection.js";
import { classifyDriverError, isBrokenTriggers, isDuplicateKey, isNodeFailure, raceKind } from "./run/driver-errors.js";
import { coalescedReads, driverRunner } from "./run/reads.js";
import { type SearchLimits, type SearchRunner, searchDeadline, searchRunner } from "./run/searches.js";
import type { RunTransaction } from "./run/writes.js";
import { transactionRunner } from "./run/writes.js";
import { SearchTextKeeper } from "./search-text.js";

// The defaults and bounds of storage's settings, for config.ts (the layers above see this module and
// repository.ts only).
export { defaultPageMaxBytes } from "./queries/search.js";
export type { StorageOptions } from "./run/connection.js";
export { MYSQL_POOL_SIZE, parseDatabaseUrl } from "./run/connection.js";
export type { SearchLimits } from "./run/searches.js";
export { defaultSearchMaxConcurrent, defaultSearchMaxPerTenant, defaultSearchTimeoutMillis } from "./run/searches.js";
export { defaultSqliteSearchWorkers } from "./run/sqlite-search-worker.js";

import { WRITE_RETRY_CAUSES, type WriteRetryCause } from "../domain/records.js";
import { INSTANCE_ID } from "../domain/upsert.js";
import { SqlWriteTransaction } from "./write-transaction.js";

/** Where the data lives, and the limits of the list's searches (`SEARCH_MAX_CONCURRENT`, `SEARCH_TIMEOUT_MS`). */
export interface RepositoryOptions extends StorageOptions {
  readonly search?: Omit<SearchLimits, "databaseTimeoutMillis"> | undefined;
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
 * How often a write is tried when it keeps hitting the same unique key
 * (ER_DUP_ENTRY, SQLite's constraint errors). Every lost race means another
 * writer committed the key, so a burst drains in 1 or 2 attempts (measured in
 * test/storage/write-races.test.ts, RACE_STATS=1); a duplicate key that
 * persists past 8 attempts is not a race any more.
 */
const duplicateKeyAttempts = 8;

/**
 * The write's deadline: StorageOptions.timeoutMillis (DATABASE_TIMEOUT_MS,
 * default 10 s) from its start. A write that loses to other writers without a
 * duplicate key (a deadlock, a lock wait timeout, a lost Galera certification
 * at COMMIT, SQLITE_BUSY) is tried again with jittered backoff until then: a
 * burst of writers on one tenant drains at the rate the database commits. On
 * a 3-node Galera cluster every commit on one node aborts the creators waiting
 * on the tenant's sequence row on the others, and 8 attempts (about 0.6 s of
 * backoff) left 28 to 47 of 300 new agents refused
 * (test/cluster/certification.test.ts). On SQLite the same budget covers
 * another process's burst of commits (a Node and a Deno process on one file).
 */
const defaultWriteBudgetMillis = 10_000;

/** What a write answers when the node's broken triggers (run/broken-triggers.ts) could not be mended in time. */
const brokenTriggersMessage =
  "The registry's database node could not take the write now (its triggers failed to load); nothing was saved. " +
  "Try again.";

/** Base of the exponential backoff between attempts, in milliseconds. */
const backoffBaseMillis = 5;

/**
 * The longest single wait between attempts, in milliseconds. 300 new agents at once over a 3-node
 * Galera cluster (test/cluster/certification.test.ts, one run each): the last answered after 6.1 s
 * with 500, 4.2 s with 200.
 */
const backoffCapMillis = 200;

/**
 * How long ping() waits for its query. A healthy database answers in
 * milliseconds; the bound keeps a probe from hanging on a connection attempt
 * (MySQL's connect timeout is 5 s) while leaving room for a busy pool.
 */
const pingTimeoutMillis = 2_000;

/**
 * How long one statement of a migration may take on MySQL: migrations rewrite
 * and index whole tables (0009 builds three indexes over every definition,
 * 0010 counts every term), which at a million definitions outlasts the
 * service's DATABASE_TIMEOUT_MS many times over.
 */
const migrationStatementMillis = 60 * 60_000;

/**
 * The process's change reader over a repository's change log (change-reader.ts), and the budget its replays share
 * (byte-gate.ts): made beside the repository.
 */
export { createByteGate } from "./byte-gate.js";
export { createChangeReader } from "./change-reader.js";

/** The connections the change reader reads the log on (MySQL): one, for the process's one reader. */
const WATCH_POOL_SIZE = 1;

/**
 * Opens the database, brings its schema up to date and returns the
 * repository. Throws `UNAVAILABLE` when the database cannot be reached.
 * On MySQL the migrations run on a pool of their own, closed when they are
 * done, whose statements may take migrationStatementMillis; connecting still
 * fails within the service's timeout. With a `databaseWriteUrl` (MySQL), the
 * write transactions, the tenants' creation and the migrations go to its
 * hosts, on a pool of their own, and everything else to `databaseUrl`'s.
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
          statementTimeoutMillis: migrationStatementMillis,
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
    { ...options.search, databaseTimeoutMillis: options.timeoutMillis },
    {
      watching: watching ?? reading,
      reading,
      pageMaxBytes: options.pageMaxBytes ?? defaultPageMaxBytes,
      writeBudgetMillis: options.timeoutMillis ?? defaultWriteBudgetMillis,
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
   * coalesced, one statement per tenant (run/reads.ts); on SQLite, in-process with no round trip to save,
   * each its own statement.
   */
  readonly #readById: (tenant: string, id: string) => Promise<DefinitionReadRow[]>;
  readonly #readByReference: (tenant: string, referenceId: string) => Promise<DefinitionReadRow[]>;
  readonly #keyedReads: () => KeyedReads;
  /** The write transaction: BEGIN, SQL built here once, COMMIT, through the driver (run/writes.ts). */
  readonly #transaction: RunTransaction;
  readonly #writes: WriteStatements;
  /**
   * The list's searches and keyset pages (queries/search.ts, run/searches.ts): SQL built per request, run
   * through the driver.
   */
  readonly #search: SearchRunner;
  readonly #searchLimits: SearchLimits;
  readonly #dialect: Database["dialect"];
  /** MySQL: the full-text texts written after COMMIT, and their repair (search-text.ts). */
  readonly #texts: SearchTextKeeper | undefined;
  /** MySQL: the writes' recovery from a node's broken triggers, one reload at a time (run/broken-triggers.ts). */
  readonly #triggerReloads = new TriggerReloads();
  /** Where a write's recovery from a node's broken triggers is told (run/broken-triggers.ts). */
  readonly #logger: RepositoryOptions["logger"];
  #changeLog: ChangeLog | undefined;
  /** Where the change log is read (createSqlRepository's `watching`): #db on SQLite. */
  readonly #watching: Knex;
  /** The ping in flight: concurrent pings share it, so probes never pile up queries on a slow database. */
  #ping: Promise<void> | undefined;
  /** RepositoryOptions.pageMaxBytes. */
  readonly #pageMaxBytes: number;
  /** The counted totals of this process's searches, by revision (counted-totals.ts). */
  readonly #countedTotals = new CountedTotals();
  /**
   * The tenants a write of this process has found: their name and prefix never change and no RPC deletes a
   * tenant, so each write after the first skips the tenant's row (a statement of ~6 a write on MySQL). A
   * tenant deleted by hand in the database is still taken as there until the process restarts; its
   * definitions' foreign keys refuse what would be written for it.
   */
  readonly #tenantsSeen = new Map<string, WriteTenant>();
  /** How long a write may keep retrying lost races (defaultWriteBudgetMillis). */
  readonly #writeBudgetMillis: number;
  /** The database hosts (DATABASE_URL may name several): what a read's node failure is tried on again. */
  readonly #hosts: number;
  /** The writer's hosts: what a write's node failure is tried on again. */
  readonly #writeHosts: number;
  /** Write transactions run again, by cause (writeRetries). */
  readonly #retries: Record<WriteRetryCause, number> = Object.fromEntries(
    WRITE_RETRY_CAUSES.map((cause) => [cause, 0]),
  ) as Record<WriteRetryCause, number>;

  constructor(
    { db, dialect, hosts }: Database,
    writer: Database,
    searchLimits: SearchLimits,
    {
      watching,
      pageMaxBytes,
      writeBudgetMillis,
      logger,
      reading,
    }: {
      watching: Database;
      /** The hot reads' connections: #db's, or (SQLite) a connection of their own. */
      reading: Database;
      pageMaxBytes: number;
      writeBudgetMillis: number;
      logger: RepositoryOptions["logger"];
    },
  ) {
    this.#watching = watching.db;
    this.#pageMaxBytes = pageMaxBytes;
    this.#writeBudgetMillis = writeBudgetMillis;
    this.#logger = logger;
    this.#hosts = hosts;
    this.#writeHosts = writer.hosts;
    this.#db = db;
    this.#writeDb = writer.db;
    this.#context = { tx: db, dialect };
    this.#writeContext = { tx: writer.db, dialect };
    this.#readDb = reading.db;
    this.#reads = { run: driverRunner(reading.db, dialect), statements: readStatements(dialect) };
    if (dialect === "mysql") {
      const byId = coalescedReads(this.#reads.run, this.#reads.statements.byId);
      const byReference = coalescedReads(this.#reads.run, this.#reads.statements.newestByReference);
      this.#readById = (tenant, id) => byId.read(tenant, id);
      this.#readByReference = (tenant, referenceId) => byReference.read(tenant, referenceId);
      this.#keyedReads = () => ({ by_id: byId.stats(), by_reference: byReference.stats() });
    } else {
      // One statement a read: counted all the same, so the metrics read alike on both databases.
      let byId = 0;
      let byReference = 0;
      this.#readById = (tenant, id) => {
        byId++;
        return readById(this.#reads, tenant, id);
      };
      this.#readByReference = (tenant, referenceId) => {
        byReference++;
        return readNewestByReference(this.#reads, tenant, referenceId);
      };
      this.#keyedReads = () => ({
        by_id: { reads: byId, statements: byId },
        by_reference: { reads: byReference, statements: byReference },
      });
    }
    // READ COMMITTED on MySQL (every connection's session level, connection.ts): a locking read
    // that finds nothing takes no gap lock. Under REPEATABLE READ the gap locks of writers
    // creating different new agents deadlock against the tenant row that numbers them, and 200
    // writers on 10 keys ran out of retries. Here what is absent is guarded by the unique
    // indexes: a racing insert of the same key, agent or externalAgentID fails with a duplicate
    // key and the work runs again. SQLite is serializable anyway.
    this.#transaction = transactionRunner(writer.db, dialect);
    this.#writes = writeStatements(dialect);
    // Gated and time-limited, so searches cannot take the pool from reads and writes (run/searches.ts).
    this.#search = searchRunner(db, dialect, searchLimits);
    this.#searchLimits = searchLimits;
    this.#dialect = dialect;
    if (dialect === "mysql") {
      this.#texts = new SearchTextKeeper(writer.db, logger);
      // A text a process died before writing (between a COMMIT and its text) is found at the next start.
      void this.#texts.repair();
    }
  }

  async write<T>(tenant: string, work: (tx: WriteTransaction) => Promise<T>): Promise<T> {
    let deadline = performance.now() + this.#writeBudgetMillis;
    let failovers = this.#writeHosts - 1;
    for (let attempt = 1; ; attempt++) {
      let committing = false;
      // The reloads of broken triggers ended before this attempt began (TriggerReloads).
      let reloadsBefore = 0;
      try {
        return await this.#triggerReloads.attempt((reloads) => {
          reloadsBefore = reloads;
          return this.#transaction(async (session) => {
            const { result, tx } = await this.#writeOnce({ session, statements: this.#writes }, tenant, work);
            // The revisions are taken last, right before COMMIT: the tenant's writers queue on them. The
            // outcome of a write lost from the moment its COMMIT is sent is unknown; before that, it was
            // rolled back.
            const last = tx.lastStatements();
            if (last === undefined) committing = true;
            else tx.settle(await session.commitWith(last, () => (committing = true)));
            // Committed: MySQL's full-text texts are written soon, several writes' at a time (search-text.ts).
            this.#texts?.keep(tx.textsToKeep());
            return result;
          });
        });
      } catch (error) {
        if (error instanceof RegistryError) throw error;
        // A table's triggers failed to load on the node (an interrupted statement left them broken in its
        // table cache: run/broken-triggers.ts): the statement failed whole (a CALL's COMMIT is its last
        // statement, so nothing was committed either), the transaction is rolled back and its connection
        // back in the pool.
        // Reloaded once for all the process's writers that met them, while none of its writes is under way
        // (TriggerReloads), then run again after a backoff, as often as the write's budget allows: the
        // reload makes every writer on the node open new instances, and on a cluster a brute-force abort of
        // one that holds rows another node's write needs breaks a new instance again (docs/galera.md); the
        // backoff lets those writes finish first. Nothing was written, so a write that still meets them at
        // its deadline, or whose reload fails, is answered UNAVAILABLE (retry), never INTERNAL.
        if (this.#dialect === "mysql" && isBrokenTriggers(error)) {
          const wait = backoffMillis(attempt);
          if (performance.now() + wait >= deadline) throw unavailable(error, brokenTriggersMessage);
          let reloaded: boolean;
          try {
            reloaded = await this.#triggerReloads.reload(reloadsBefore, () =>
              reloadTriggers(this.#writeDb, this.#writeBudgetMillis / 2000),
            );
          } catch (reloadError) {
            // The node failed under the reload: the pool moved on, and the write is tried on the next host.
            if (failovers-- > 0 && isNodeFailure(reloadError)) {
              deadline = performance.now() + this.#writeBudgetMillis;
              this.#retries.node_failed++;
              continue;
            }
            this.#logger?.warn("a table's triggers failed to load and could not be reloaded", {
              error: String(error),
              reload: String(reloadError),
            });
            throw unavailable(error, brokenTriggersMessage);
          }
          this.#logger?.warn(
            reloaded
              ? "a table's triggers failed to load on the database node; reloaded"
              : "a table's triggers failed to load on the database node; reloaded since the write began",
            { error: String(error) },
          );
          this.#retries.triggers_reloaded++;
          await sleep(wait);
          continue;
        }
        const kind = classifyDriverError(error);
        if (kind === "unavailable") {
          // Lost while COMMIT was on its way, the write may have been committed: say so, not "failed".
          if (committing) throw outcomeUnknown(error);
          // Its node failed before COMMIT: nothing was written, and the pool moved to the next host. Tried
          // there (once per other host) with a deadline of its own: a frozen node may have taken all of it.
          if (failovers-- > 0 && isNodeFailure(error)) {
            deadline = performance.now() + this.#writeBudgetMillis;
            this.#retries.node_failed++;
            continue;
          }
          throw unavailable(error);
        }
        if (kind !== "retryable") throw error;
        // A lost race, at a statement or at COMMIT (a lost certification): rolled back, nothing written.
        const sameKey = isDuplicateKey(error);
        const wait = backoffMillis(attempt);
        if ((sameKey && attempt >= duplicateKeyAttempts) || performance.now() + wait >= deadline)
          throw writeConflict(error, sameKey ? "same key" : "busy tenant");
        // A deadlock error at COMMIT is no InnoDB deadlock (those happen on a statement's lock): Galera's
        // lost certification.
        const race = raceKind(error);
        this.#retries[race === "deadlock" && committing ? "certification" : race]++;
        await sleep(wait);
      }
    }
  }

  async #writeOnce<T>(
    context: WriteContext,
    tenant: string,
    work: (tx: WriteTransaction) => Promise<T>,
  ): Promise<{ result: T; tx: SqlWriteTransaction }> {
    const tx = new SqlWriteTransaction(
      context,
      this.#tenantsSeen.get(tenant) ?? (await this.#tenantIn(context, tenant)),
    );
    try {
      const result = await work(tx);
      // A race the work caught and went on from: the database rolled back (MySQL does on a
      // deadlock) or refused a write, so committing what is left would be half a write.
      tx.throwIfFailed();
      tx.throwIfIncomplete();
      return { result, tx };
    } catch (error) {
      tx.throwIfFailed();
      throw error;
    } finally {
      tx.end();
    }
  }

  /** The tenant's row, read in the write's transaction; remembered once found (WriteTenant: it never changes). */
  async #tenantIn(context: WriteContext, name: string): Promise<WriteTenant> {
    const row = await findTenantIn(context, name);
    if (row === undefined) throw tenantNotFound(name);
    const tenant: WriteTenant = { name, sequencePrefix: row.sequence_prefix };
    this.#tenantsSeen.set(name, tenant);
    return tenant;
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
    const rows = await this.#guard(() => this.#readById(tenant, INSTANCE_ID.test(id) ? id : ""));
    return oneOf(tenant, rows);
  }

  async findNewestByReference(tenant: string, referenceId: string): Promise<Found> {
    const rows = await this.#guard(() => this.#readByReference(tenant, referenceId));
    return oneOf(tenant, rows);
  }

  async listVersions(tenant: string, agentNumber: number, page: Page, work: Work = {}): Promise<ListResult> {
    const { limit, offset } = normalise(page);
    // Agents are numbered from 1, so 0 stands for a number no agent can have; the tenant is still checked.
    const agent = Number.isSafeInteger(agentNumber) ? agentNumber : 0;
    const { sql, bindings } = buildVersions(
      this.#dialect,
      tenant,
      agent,
      { limit, offset, after: page.after },
      this.#pageMaxBytes,
    );
    // One agent's versions: an index range and a count of that agent's versions, never the tenant's.
    const rows = inSearchOrder(
      await this.#guard(() => this.#search(sql, bindings, { bounded: true, tenant, signal: work.signal })),
      "createdAt",
      true,
    );
    return pageWithNext(tenant, rows, { limit, maxBytes: this.#pageMaxBytes }, () => undefined);
  }

  async search(tenant: string, asked: ListQuery, work: Work = {}): Promise<ListResult> {
    const { limit, offset } = normalise(asked);
    // One budget for the search, whatever statements it takes: each gets what is left.
    const deadline = searchDeadline(this.#searchLimits);
    // Several words, or a last word typed partly: their counters first (bounded), to drive by the rarest
    // word and to resolve the last one (queries/search.ts resolveWords).
    let query = asked;
    if (needsWordPlan(asked)) {
      const plan = planWords(tenant, asked);
      const planned = await this.#guard(() =>
        this.#search(plan.sql, plan.bindings, { bounded: true, tenant, signal: work.signal, deadline }),
      );
      query = resolveWords(asked, wordPlanOf(planned as unknown as Array<Record<string, unknown>>));
    }
    // MySQL's relevance scores the full-text texts, written after COMMIT: this process's writes' are in first.
    if (query.order.key === "relevance") await this.#texts?.flushed();
    const { sql, bindings, countKey } = buildSearch(
      this.#dialect,
      tenant,
      { ...query, limit, offset },
      this.#pageMaxBytes,
      this.#countedTotals.get,
    );
    const call = { bounded: isBounded(query), tenant, signal: work.signal, deadline };
    const rows = await this.#guard(() => this.#search(sql, bindings, call));
    const ordered = inSearchOrder(rows, query.order.key, query.order.descending);
    const page = pageWithNext(tenant, ordered, { limit, maxBytes: this.#pageMaxBytes }, (row) =>
      orderValueOf(query.order.key, row),
    );
    const version = rows[0]?.total_version;
    if (countKey !== undefined && version != null)
      this.#countedTotals.keep(countKey, { version: fromDatabaseInteger(version), total: page.total });
    return page;
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
    const rows = await this.#guard(() => listTenants(this.#context));
    return rows.map(toTenant);
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
        reject(unavailable(new Error(`The database did not answer a ping within ${pingTimeoutMillis} ms.`)));
      }, pingTimeoutMillis);
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
      searchesWaiting: this.#search.waiting(),
    };
  }

  writeRetries(): WriteRetries {
    return { ...this.#retries };
  }

  keyedReads(): KeyedReads {
    return this.#keyedReads();
  }

  async close(): Promise<void> {
    await this.#texts?.close();
    // The search workers first: their read-only connections end before the last one closes the file.
    await this.#search.close();
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

/**
 * The one instance a hot read found, or undefined, with the tenant revision it read at; `TENANT_NOT_FOUND` when
 * it found no tenant row.
 */
function oneOf(tenant: string, rows: readonly DefinitionReadRow[]): Found {
  const [row] = rows;
  if (row === undefined) throw tenantNotFound(tenant);
  return { stored: toStoredDefinition(tenant, row), revision: tenantRevisionOf(row) };
}

/** The tenant revision a read's row carries: 0 for a tenant no write has counted yet (no row in 0015's table). */
function tenantRevisionOf(row: DefinitionReadRow): number {
  return row.tenant_revision == null ? 0 : fromDatabaseInteger(row.tenant_revision);
}

/**
 * The page a search read (in order: up to `limit` rows and one more, fewer when
 * the byte budget cut them, queries/search.ts's pageStatement), with its total, and
 * the position of its last row when a row after it shows there is a next page.
 * The page ends at `limit` rows, or before the row that would take its stored
 * JSON past `maxBytes`; its first row is answered whatever its size.
 */
function pageWithNext(
  tenant: string,
  rows: readonly SearchRow[],
  size: { limit: number; maxBytes: number },
  orderValue: (row: SearchRow) => string | undefined,
): ListResult {
  let answered = 0;
  let bytes = 0;
  for (const row of rows) {
    if (answered === size.limit || row.id === null) break;
    bytes += row.document_json?.byteLength ?? 0;
    if (answered > 0 && bytes > size.maxBytes) break;
    answered++;
  }
  const more = rows.length > answered && rows[answered]?.id != null;
  const all = pageOf(tenant, rows);
  const page = more ? { ...all, items: all.items.slice(0, answered) } : all;
  const last = rows[answered - 1];
  if (!more || last === undefined || last.seq == null) return page;
  const value = orderValue(last);
  return {
    ...page,
    next: value === undefined ? { seq: fromDatabaseInteger(last.seq) } : { seq: fromDatabaseInteger(last.seq), value },
  };
}

/** The page a search read, with its total; `TENANT_NOT_FOUND` when it found no tenant row. */
function pageOf(tenant: string, rows: readonly DefinitionReadRow[]): ListResult {
  const [first] = rows;
  if (first === undefined) throw tenantNotFound(tenant);
  const items: StoredDefinition[] = [];
  for (const row of rows) {
    const stored = toStoredDefinition(tenant, row);
    if (stored !== undefined) items.push(stored);
  }
  // mysql2 answers COUNT(*) as a number or, for BIGINT with supportBigNumbers, possibly a string.
  return { total: fromDatabaseInteger(first.total ?? 0), items, revision: tenantRevisionOf(first) };
}

function normalise(page: Page): { limit: number; offset: number } {
  return { limit: countOf(page.limit), offset: countOf(page.offset) };
}

/** A whole number from 0 to 2^53 - 1: what both databases take for LIMIT and OFFSET, bound as it is into SQL. */
function countOf(value: number): number {
  return Number.isNaN(value) ? 0 : Math.min(Math.max(0, Math.trunc(value)), Number.MAX_SAFE_INTEGER);
}

function translate(error: unknown): unknown {
  if (error instanceof RegistryError) return error;
  return classifyDriverError(error) === "unavailable" ? unavailable(error) : error;
}

/** Exponential with full jitter, so racing writers spread out instead of colliding again. */
function backoffMillis(attempt: number): number {
  return Math.random() * Math.min(backoffCapMillis, backoffBaseMillis * 2 ** attempt);
}

function sleep(millis: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, millis));
}
