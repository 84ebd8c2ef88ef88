/**
 * The repository on knex: MySQL/MariaDB in production, SQLite embedded.
 */
import { Buffer } from "node:buffer";
import type { Knex } from "knex";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { outcomeUnknown, RegistryError, tenantExists, tenantNotFound, unavailable, writeConflict } from "../domain/errors.js";
import type { Lifecycle } from "../domain/records.js";
import type { Database, StorageOptions } from "./connection.js";
import { openDatabase } from "./connection.js";
import { classifyDriverError, isDuplicateKey, isSqliteBusy } from "./driver-errors.js";
import {
  buildSearch,
  buildVersions,
  defaultPageMaxBytes,
  inSearchOrder,
  isBounded,
  orderValueOf,
  type SearchLimits,
  type SearchRow,
  type SearchRunner,
  searchDeadline,
  searchRunner,
} from "./list-search.js";
import { migrateToLatest } from "./migrations/index.js";
import type { QueryContext, ReadContext, WriteContext, WriteStatements } from "./queries.js";
import {
  clearLatest,
  findAgentByNameForUpdate,
  findByKeyForUpdate,
  findExternalIdOwnerForUpdate,
  findInstanceById,
  findInstanceByIdForUpdate,
  findInstancesOfAgentForUpdate,
  findNewestInstanceByReference,
  findTenant,
  findTenantIn,
  insertAgent,
  insertDefinition,
  insertExternalId,
  insertTenant,
  listTenants,
  lockAgent,
  lockSequenceAndFindAgent,
  newestLiveOfAgent,
  readById,
  readNewestByReference,
  readStatements,
  readStoredInWrite,
  refreshLatest,
  takeAgentNumber,
  updateDocument,
  updateStatus,
  writeStatements,
} from "./queries.js";
import { driverRunner } from "./read-runner.js";
import type {
  AgentDefinitionRepository,
  AgentRef,
  DefinitionStatus,
  InstanceRef,
  KeyedInstanceRef,
  ListQuery,
  ListResult,
  Page,
  PoolStats,
  StoredDefinition,
  Tenant,
  UpsertKey,
  Work,
  WriteTransaction,
} from "./repository.js";
import type { DefinitionReadRow } from "./rows.js";
import { agentReferenceId, encodeDefinition, fromDatabaseInteger, toAgentRef, toDatabaseTimestamp, toInstanceRef, toStoredDefinition, toTenant } from "./rows.js";
import { indexDefinition } from "./search-index.js";
import type { RunTransaction } from "./write-runner.js";
import { transactionRunner } from "./write-runner.js";

export type { StorageOptions } from "./connection.js";
export type { SearchLimits } from "./list-search.js";
export { defaultSequencePrefix, defaultTenant } from "./repository.js";

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
}

/**
 * How often a write is tried before a race is reported as a conflict. Every
 * lost race means another writer committed, so a burst drains; measured in
 * test/storage/write-races.test.ts (RACE_STATS=1), 200 writers on 10 keys from
 * two processes and 100 creators of new agents need at most 2 attempts on
 * MariaDB and SQLite. 8 leaves room for slower servers.
 */
const writeAttempts = 8;
/**
 * SQLite, past those attempts: how long a write that keeps losing to another
 * process's commits (SQLITE_BUSY; a Node and a Deno process on one file) still
 * tries. While the other process runs a burst of writes, every transaction of
 * this one that overlaps one of its commits fails, so the attempts that matter
 * are the ones after its burst; 8 attempts (about 1 s of backoff) ran out in 2
 * runs of 3 of test/e2e/concurrency.test.ts on a loaded machine.
 */
const sqliteBusyMillis = 10_000;
/** Base of the exponential backoff between attempts, in milliseconds. */
const backoffBaseMillis = 5;
/** The longest single wait between attempts, in milliseconds. */
const backoffCapMillis = 500;
/**
 * How long ping() waits for `SELECT 1`. A healthy database answers in
 * milliseconds; the bound keeps a probe from hanging on a connection attempt
 * (MySQL's connect timeout is 5 s) while leaving room for a busy pool.
 */
const pingTimeoutMillis = 2_000;

const instanceId = /^[0-9a-f]{32}$/;

/**
 * How long one statement of a migration may take on MySQL: migrations rewrite
 * and index whole tables (0009 builds three indexes over every definition,
 * 0010 counts every term), which at a million definitions outlasts the
 * service's DATABASE_TIMEOUT_MS many times over.
 */
const migrationStatementMillis = 60 * 60_000;

/**
 * Opens the database, brings its schema up to date and returns the
 * repository. Throws `UNAVAILABLE` when the database cannot be reached.
 * On MySQL the migrations run on a pool of their own, closed when they are
 * done, whose statements may take migrationStatementMillis; connecting still
 * fails within the service's timeout.
 */
export async function createKnexRepository(options: RepositoryOptions): Promise<AgentDefinitionRepository> {
  const database = await openDatabase(options);
  const migrating = database.dialect === "mysql" ? await openDatabase({ ...options, statementTimeoutMillis: migrationStatementMillis }) : database;
  try {
    await migrateToLatest(migrating.db);
  } catch (error) {
    await database.db.destroy().catch(() => undefined);
    throw translate(error);
  } finally {
    if (migrating !== database) await migrating.db.destroy().catch(() => undefined);
  }
  return new KnexRepository(database, { ...options.search, databaseTimeoutMillis: options.timeoutMillis }, options.pageMaxBytes ?? defaultPageMaxBytes);
}

class KnexRepository implements AgentDefinitionRepository {
  readonly #db: Knex;
  readonly #context: QueryContext;
  /** The hot reads: SQL built here, once, and run through the driver (read-runner.ts). */
  readonly #reads: ReadContext;
  /** The write transaction: BEGIN, SQL built here once, COMMIT, through the driver (write-runner.ts). */
  readonly #transaction: RunTransaction;
  readonly #writes: WriteStatements;
  /** The list's searches and keyset pages (list-search.ts): SQL built per request, run through the driver. */
  readonly #search: SearchRunner;
  readonly #searchLimits: SearchLimits;
  readonly #dialect: Database["dialect"];
  /** The `SELECT 1` in flight: concurrent pings share it, so probes never pile up queries on a slow database. */
  #ping: Promise<void> | undefined;
  /** RepositoryOptions.pageMaxBytes. */
  readonly #pageMaxBytes: number;

  constructor({ db, dialect }: Database, searchLimits: SearchLimits, pageMaxBytes: number) {
    this.#pageMaxBytes = pageMaxBytes;
    this.#db = db;
    this.#context = { tx: db, dialect };
    this.#reads = { run: driverRunner(db, dialect), statements: readStatements(dialect) };
    // READ COMMITTED on MySQL (every connection's session level, connection.ts): a locking read
    // that finds nothing takes no gap lock. Under REPEATABLE READ the gap locks of writers
    // creating different new agents deadlock against the tenant row that numbers them, and 200
    // writers on 10 keys ran out of retries. Here what is absent is guarded by the unique
    // indexes: a racing insert of the same key, agent or externalAgentID fails with a duplicate
    // key and the work runs again. SQLite is serializable anyway.
    this.#transaction = transactionRunner(db, dialect);
    this.#writes = writeStatements(dialect);
    // Gated and time-limited, so searches cannot take the pool from reads and writes (list-search.ts).
    this.#search = searchRunner(db, dialect, searchLimits);
    this.#searchLimits = searchLimits;
    this.#dialect = dialect;
  }

  async write<T>(tenant: string, work: (tx: WriteTransaction) => Promise<T>): Promise<T> {
    const started = performance.now();
    for (let attempt = 1; ; attempt++) {
      let committing = false;
      try {
        return await this.#transaction(async (session) => {
          const result = await this.#writeOnce({ session, statements: this.#writes }, tenant, work);
          committing = true;
          return result;
        });
      } catch (error) {
        if (error instanceof RegistryError) throw error;
        const kind = classifyDriverError(error);
        // Lost while COMMIT was on its way, the write may have been committed: say so, not "failed".
        if (kind === "unavailable") throw committing ? outcomeUnknown(error) : unavailable(error);
        if (kind !== "retryable") throw error;
        const stillBusy = isSqliteBusy(error) && performance.now() - started < sqliteBusyMillis;
        if (attempt >= writeAttempts && !stillBusy) throw writeConflict(error);
        await sleep(backoffMillis(attempt));
      }
    }
  }

  async #writeOnce<T>(context: WriteContext, tenant: string, work: (tx: WriteTransaction) => Promise<T>): Promise<T> {
    const row = await findTenantIn(context, tenant);
    if (row === undefined) throw tenantNotFound(tenant);
    const tx = new SqlWriteTransaction(context, toTenant(row));
    try {
      const result = await work(tx);
      // A race the work caught and went on from: the database rolled back (MySQL does on a
      // deadlock) or refused a write, so committing what is left would be half a write.
      tx.throwIfFailed();
      return result;
    } catch (error) {
      tx.throwIfFailed();
      throw error;
    } finally {
      tx.end();
    }
  }

  async get(tenant: string, id: string): Promise<StoredDefinition | undefined> {
    // An id we could not have issued (which also keeps non-ASCII out of a comparison with the
    // ASCII id column) is looked up as "", which no row has: the same one statement still
    // tells an unknown tenant from an unknown id.
    const rows = await guard(() => readById(this.#reads, tenant, instanceId.test(id) ? id : ""));
    return oneOf(tenant, rows);
  }

  async getNewestByReference(tenant: string, referenceId: string): Promise<StoredDefinition | undefined> {
    const rows = await guard(() => readNewestByReference(this.#reads, tenant, referenceId));
    return oneOf(tenant, rows);
  }

  async listVersions(tenant: string, agentNumber: number, page: Page, work: Work = {}): Promise<ListResult> {
    const { limit, offset } = normalise(page);
    // Agents are numbered from 1, so 0 stands for a number no agent can have; the tenant is still checked.
    const agent = Number.isSafeInteger(agentNumber) ? agentNumber : 0;
    const { sql, bindings } = buildVersions(this.#dialect, tenant, agent, { limit, offset, after: page.after }, this.#pageMaxBytes);
    // One agent's versions: an index range and a count of that agent's versions, never the tenant's.
    const rows = inSearchOrder(await guard(() => this.#search(sql, bindings, { bounded: true, tenant, signal: work.signal })), "createdAt", true);
    return pageWithNext(tenant, rows, { limit, maxBytes: this.#pageMaxBytes }, () => undefined);
  }

  async search(tenant: string, query: ListQuery, work: Work = {}): Promise<ListResult> {
    const { limit, offset } = normalise(query);
    const { sql, bindings, countAlone } = buildSearch(this.#dialect, tenant, { ...query, limit, offset }, this.#pageMaxBytes);
    // One budget for the search, whatever statements it takes: each gets what is left.
    const call = { bounded: isBounded(query), tenant, signal: work.signal, deadline: searchDeadline(this.#searchLimits) };
    let rows = await guard(() => this.#search(sql, bindings, call));
    if (countAlone !== undefined && rows.length > 0 && rows.every((row) => row.id === null)) {
      // An empty page (the tenant's row alone) of a search that counts in its page: counted alone.
      const [counted] = await guard(() => this.#search(countAlone.sql, countAlone.bindings, call));
      rows = rows.map((row) => ({ ...row, total: counted?.total ?? 0 }));
    }
    const ordered = inSearchOrder(rows, query.order.key, query.order.descending);
    return pageWithNext(tenant, ordered, { limit, maxBytes: this.#pageMaxBytes }, (row) => orderValueOf(query.order.key, row));
  }

  async getTenant(tenant: string): Promise<Tenant | undefined> {
    const row = await guard(() => findTenant(this.#context, tenant));
    return row === undefined ? undefined : toTenant(row);
  }

  async createTenant(name: string, sequencePrefix: string | null): Promise<Tenant> {
    const createdAt = new Date();
    try {
      await insertTenant(this.#context, {
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
    const rows = await guard(() => listTenants(this.#context));
    return rows.map(toTenant);
  }

  async ping(): Promise<void> {
    const query = (this.#ping ??= this.#db
      .raw("SELECT 1")
      .then(
        () => undefined,
        (error: unknown) => {
          // Whatever stops SELECT 1 (a refused connection, a full pool) makes the database unusable.
          throw unavailable(error);
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
        reject(unavailable(new Error(`The database did not answer SELECT 1 within ${pingTimeoutMillis} ms.`)));
      }, pingTimeoutMillis);
    });
    try {
      await Promise.race([query, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  poolStats(): PoolStats {
    // knex's pool is tarn's; it exists from creation until destroy().
    const pool = this.#db.client.pool as Partial<TarnPoolCounts> | undefined;
    return {
      used: pool?.numUsed?.() ?? 0,
      free: pool?.numFree?.() ?? 0,
      pendingAcquires: pool?.numPendingAcquires?.() ?? 0,
      max: pool?.max ?? 0,
      searchesWaiting: this.#search.waiting(),
    };
  }

  async close(): Promise<void> {
    // The search workers first: their read-only connections end before the last one closes the file.
    await this.#search.close();
    await this.#db.destroy();
  }
}

/** The counters of a tarn pool that poolStats reads. */
interface TarnPoolCounts {
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
  readonly max: number;
}

/** The WriteTransaction handed to `write`'s work: the queries, bound to one transaction and tenant. */
class SqlWriteTransaction implements WriteTransaction {
  readonly tenant: Tenant;
  readonly #context: WriteContext;
  #ended = false;
  /** The first race or connection failure of a statement; it dooms the whole attempt. */
  #failure: { readonly error: unknown } | undefined;
  /** Agents whose row this transaction holds locked (MySQL), so their latest flag is ours to move without asking again. */
  readonly #lockedAgents = new Set<number>();
  /** Agents this transaction created: they have no other versions whose latest flag would need clearing. */
  readonly #createdAgents = new Set<number>();

  constructor(context: WriteContext, tenant: Tenant) {
    this.#context = context;
    this.tenant = tenant;
  }

  async findByKey(key: UpsertKey): Promise<KeyedInstanceRef | undefined> {
    const row = await this.#run((context) => findByKeyForUpdate(context, this.tenant.name, key));
    return row === undefined ? undefined : toInstanceRef(row);
  }

  async findById(id: string): Promise<KeyedInstanceRef | undefined> {
    if (!instanceId.test(id)) return undefined;
    const row = await this.#run((context) => findInstanceById(context, this.tenant.name, id));
    return row === undefined ? undefined : toInstanceRef(row);
  }

  async findByIdForUpdate(id: string): Promise<KeyedInstanceRef | undefined> {
    if (!instanceId.test(id)) return undefined;
    const row = await this.#run((context) => findInstanceByIdForUpdate(context, this.tenant.name, id));
    return row === undefined ? undefined : toInstanceRef(row);
  }

  async findVersionsForUpdate(agent: AgentRef): Promise<KeyedInstanceRef[]> {
    const rows = await this.#run(async (context) => {
      // The agent first, as every writer that moves its latest flag takes it (queries.lockAgent).
      await this.#lockAgent(context, agent.number);
      return findInstancesOfAgentForUpdate(context, this.tenant.name, agent.number);
    });
    return rows.map(toInstanceRef);
  }

  async isAgentDeactivated(agent: AgentRef): Promise<boolean> {
    return this.#run(async (context) => {
      await this.#lockAgent(context, agent.number);
      return (await newestLiveOfAgent(context, this.tenant.name, agent.number)) === undefined;
    });
  }

  async findNewestByReference(referenceId: string): Promise<InstanceRef | undefined> {
    const row = await this.#run((context) => findNewestInstanceByReference(context, this.tenant.name, referenceId));
    return row === undefined ? undefined : toInstanceRef(row);
  }

  async findAgentByName(providerId: string, name: string): Promise<AgentRef | undefined> {
    const row = await this.#run(async (context) => {
      const tenant = this.tenant.name;
      const found = await findAgentByNameForUpdate(context, tenant, providerId, name);
      if (found !== undefined) {
        this.#lockedAgents.add(fromDatabaseInteger(found.number));
        return found;
      }
      // Under READ COMMITTED nothing locks an absent row, and the caller decides on the absence
      // beyond inserting the agent (e.g. an externalAgentID held by someone else is a clash for a
      // new agent): so hold the tenant's sequence, which every creator of an agent holds until
      // it commits, and look again. From here the agent stays absent until we create it. The
      // first look takes no such lock, so new versions of existing agents never queue on it.
      return context.statements.dialect === "mysql" ? lockSequenceAndFindAgent(context, tenant, providerId, name) : undefined;
    });
    return row === undefined ? undefined : toAgentRef(row);
  }

  async findExternalIdOwner(providerId: string, externalAgentId: string): Promise<number | undefined> {
    const row = await this.#run((context) => findExternalIdOwnerForUpdate(context, this.tenant.name, providerId, externalAgentId));
    return row === undefined ? undefined : fromDatabaseInteger(row.agent_number);
  }

  createAgent(providerId: string, name: string): Promise<AgentRef> {
    // The prefix as the transaction read it: a tenant's prefix is set when it is created and no
    // statement changes it, so it need not be read again under the sequence's lock.
    const prefix = this.tenant.sequencePrefix;
    const tenant = this.tenant.name;
    // Everything but the number is ready before the sequence is taken: from there to COMMIT every
    // other creator in the tenant waits.
    const createdAt = toDatabaseTimestamp(new Date());
    return this.#run(async (context) => {
      if (prefix === null) {
        // The service answers A2849 before it gets here; this guards against a bug, not a request.
        throw new Error(`Tenant "${tenant}" has no agent id sequence generator, so it cannot number a new agent.`);
      }
      const number = await takeAgentNumber(context, tenant);
      const referenceId = agentReferenceId(prefix, number);
      await insertAgent(context, { tenant, number, reference_id: referenceId, provider_id: providerId, name, created_at: createdAt });
      // Our own uncommitted row: no one else can lock it or add versions to it before we commit.
      this.#lockedAgents.add(number);
      this.#createdAgents.add(number);
      return { number, referenceId };
    });
  }

  async claimExternalId(providerId: string, externalAgentId: string, agentNumber: number): Promise<void> {
    await this.#run((context) =>
      insertExternalId(context, {
        tenant: this.tenant.name,
        provider_id: providerId,
        external_agent_id: externalAgentId,
        agent_number: agentNumber,
        created_at: toDatabaseTimestamp(new Date()),
      }),
    );
  }

  async insert(key: UpsertKey, agent: AgentRef, definition: AgentDefinition): Promise<StoredDefinition> {
    if (!instanceId.test(definition.id)) {
      throw new Error(`insert() was given "${definition.id}" as a new instance id; expected 32 lowercase hex characters.`);
    }
    const tenant = this.tenant.name;
    const now = new Date();
    const timestamp = toDatabaseTimestamp(now);
    const { document, json, binary } = encodeDefinition(definition);
    await this.#run(async (context) => {
      // The new version is ACTIVE and the agent's newest, so it takes the latest flag from the
      // others; under the agent's lock, so that concurrent writers of the agent see each other.
      // A new agent has no others: its first version costs no statement more than before.
      if (!this.#createdAgents.has(agent.number)) {
        await this.#lockAgent(context, agent.number);
        await clearLatest(context, tenant, agent.number);
      }
      const seq = await insertDefinition(context, {
        id: definition.id,
        tenant,
        name: key.name,
        provider_id: key.providerId,
        version: key.version,
        agent_number: agent.number,
        document,
        document_binary: binary,
        created_at: timestamp,
        updated_at: timestamp,
        status_changed_at: timestamp,
        is_latest: true,
      });
      await indexDefinition(context, tenant, definition.id, definition, seq);
    });
    return {
      id: definition.id,
      tenant,
      agent,
      json,
      binary,
      createdAt: now,
      updatedAt: now,
      revision: 1,
      status: "ACTIVE",
      statusMessage: null,
      statusChangedAt: now,
      latest: true,
    };
  }

  async update(existing: KeyedInstanceRef, definition: AgentDefinition): Promise<StoredDefinition> {
    if (existing.tenant !== this.tenant.name) {
      throw new Error(`update() was given an instance of tenant "${existing.tenant}" in a transaction on "${this.tenant.name}".`);
    }
    if (definition.id !== existing.id) {
      // The id is the instance's identity and links versions: an update must never move it.
      throw new Error(`update() was given id "${definition.id}" for the existing instance "${existing.id}".`);
    }
    const { document, json, binary } = encodeDefinition(definition);
    // The same content again (an idempotent re-registration) is no change: no write, and the
    // revision, updatedAt and so the ETag stay, so the caches of readers stay valid.
    if (Buffer.compare(existing.binary, binary) === 0) {
      return { ...lifecycleOf(existing), id: existing.id, tenant: existing.tenant, agent: existing.agent, json, binary, createdAt: existing.createdAt, updatedAt: existing.updatedAt };
    }
    const now = new Date();
    await this.#run(async (context) => {
      await updateDocument(context, existing.tenant, existing.id, { document, document_binary: binary, updated_at: toDatabaseTimestamp(now) });
      await indexDefinition(context, existing.tenant, existing.id, definition);
    });
    // Status, its message and time, and the latest flag stay: only content changed.
    return {
      id: existing.id,
      tenant: existing.tenant,
      agent: existing.agent,
      json,
      binary,
      createdAt: existing.createdAt,
      updatedAt: now,
      revision: existing.revision + 1,
      status: existing.status,
      statusMessage: existing.statusMessage,
      statusChangedAt: existing.statusChangedAt,
      latest: existing.latest,
    };
  }

  async setStatus(versions: readonly InstanceRef[], status: DefinitionStatus, statusMessage: string | null): Promise<StoredDefinition[]> {
    const [first] = versions;
    if (first === undefined) return [];
    const tenant = this.tenant.name;
    if (versions.some((v) => v.tenant !== tenant || v.agent.number !== first.agent.number)) {
      throw new Error(`setStatus() was given versions of more than one agent, or of another tenant than "${tenant}".`);
    }
    const at = toDatabaseTimestamp(new Date());
    return this.#run(async (context) => {
      // Agent, then versions: the order findVersionsForUpdate and insert lock in.
      await this.#lockAgent(context, first.agent.number);
      for (const version of versions) await updateStatus(context, tenant, version.id, { status, status_message: statusMessage, at });
      await refreshLatest(context, tenant, first.agent.number);
      const stored: StoredDefinition[] = [];
      for (const version of versions) {
        const row = await readStoredInWrite(context, tenant, version.id);
        const definition = row === undefined ? undefined : toStoredDefinition(tenant, row);
        if (definition === undefined) throw new Error(`Agent definition ${version.id} vanished inside its own status change.`);
        stored.push(definition);
      }
      return stored;
    });
  }

  /** Locks the agent's row (queries.lockAgent) unless this transaction holds it already. */
  async #lockAgent(context: WriteContext, agentNumber: number): Promise<void> {
    if (this.#lockedAgents.has(agentNumber)) return;
    await lockAgent(context, this.tenant.name, agentNumber);
    this.#lockedAgents.add(agentNumber);
  }

  /** Rethrows the failure that doomed this attempt, if any. */
  throwIfFailed(): void {
    if (this.#failure !== undefined) throw this.#failure.error;
  }

  /** Called when the transaction is over; later calls fail loudly instead of running outside it. */
  end(): void {
    this.#ended = true;
  }

  async #run<T>(query: (context: WriteContext) => Promise<T>): Promise<T> {
    if (this.#ended) throw new Error("A WriteTransaction was used after its write() ended.");
    this.throwIfFailed();
    try {
      return await query(this.#context);
    } catch (error) {
      if (classifyDriverError(error) !== "other") this.#failure ??= { error };
      throw error;
    }
  }
}

/** The one instance a hot read found, or undefined; `TENANT_NOT_FOUND` when it found no tenant row. */
function oneOf(tenant: string, rows: readonly DefinitionReadRow[]): StoredDefinition | undefined {
  const [row] = rows;
  if (row === undefined) throw tenantNotFound(tenant);
  return toStoredDefinition(tenant, row);
}

/**
 * The page a search read (in order: up to `limit` rows and one more, fewer when
 * the byte budget cut them, list-search.ts's pageStatement), with its total, and
 * the position of its last row when a row after it shows there is a next page.
 * The page ends at `limit` rows, or before the row that would take its stored
 * JSON past `maxBytes`; its first row is answered whatever its size.
 */
function pageWithNext(tenant: string, rows: readonly SearchRow[], size: { limit: number; maxBytes: number }, orderValue: (row: SearchRow) => string | undefined): ListResult {
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
  return { ...page, next: value === undefined ? { seq: fromDatabaseInteger(last.seq) } : { seq: fromDatabaseInteger(last.seq), value } };
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
  return { total: fromDatabaseInteger(first.total ?? 0), items };
}

function normalise(page: Page): { limit: number; offset: number } {
  return { limit: countOf(page.limit), offset: countOf(page.offset) };
}

/** A whole number from 0 to 2^53 - 1: what both databases take for LIMIT and OFFSET, bound as it is into SQL. */
function countOf(value: number): number {
  return Number.isNaN(value) ? 0 : Math.min(Math.max(0, Math.trunc(value)), Number.MAX_SAFE_INTEGER);
}

/** Runs a read, turning connection failures into `UNAVAILABLE`. */
async function guard<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    throw translate(error);
  }
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

/** Whether two byte arrays hold the same bytes. */

/** The lifecycle members of an instance, as they are. */
function lifecycleOf(instance: InstanceRef): Lifecycle {
  return { revision: instance.revision, status: instance.status, statusMessage: instance.statusMessage, statusChangedAt: instance.statusChangedAt, latest: instance.latest };
}
