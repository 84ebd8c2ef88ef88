import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type { ListQuery, Position } from "../domain/list-query.js";
import type { LivenessDecision, LivenessNow } from "../domain/liveness.js";
import type {
  AgentRef,
  DefinitionStatus,
  InstanceRef,
  KeyedInstanceRef,
  KeyedReads,
  PoolStats,
  StoredDefinition,
  Tenant,
  UpsertKey,
  WriteRetries,
} from "../domain/records.js";
import type { DefinitionIndex } from "../domain/search-terms.js";
import type { KeyToHold, ProviderKey, ProviderKeyChange, TenantSettings } from "../domain/tenant-admin.js";

export type { ListQuery, Position } from "../domain/list-query.js";
export type {
  AgentRef,
  DefinitionStatus,
  InstanceRef,
  KeyedInstanceRef,
  KeyedReads,
  PoolStats,
  StoredDefinition,
  Tenant,
  UpsertKey,
  WriteRetries,
} from "../domain/records.js";
export type {
  KeyToHold,
  ProviderKey,
  ProviderKeyChange,
  SignaturePolicy,
  TenantSettings,
} from "../domain/tenant-admin.js";

/**
 * The request a read works for. `signal` aborts when nobody waits for the
 * answer any more (the client closed its connection or reset its stream, a
 * gRPC deadline passed): a search then stops where it is, out of the gate's
 * line or killed at the database, and rejects with the signal's reason.
 */
export interface Work {
  readonly signal?: AbortSignal | undefined;
}

/**
 * The tenant a fresh database holds, so an installation accepts definitions
 * without an admin step. Migration 0002 seeds it with its own copy of these
 * values (migrations import nothing of the runtime's); sql-repository.test.ts
 * pins that the two agree.
 */
export const defaultTenant = "default";

/** The sequence prefix of the default tenant: its agents are `Agent_ID=AGENT-1`, `Agent_ID=AGENT-2`... */
export const defaultSequencePrefix = "AGENT-";

export interface Page {
  readonly limit: number;
  readonly offset: number;
  /** Keyset paging: the page starts after this row (then `offset` is 0). */
  readonly after?: Position;
}

export interface ListResult {
  /** How many records match, across all pages. */
  readonly total: number;
  /**
   * The tenant's revision in the snapshot the page was read from: the page holds every change up to it and
   * none after it, so watching from it misses nothing.
   */
  readonly revision: number;
  readonly items: readonly StoredDefinition[];
  /** Where the next page starts; absent on the last page. */
  readonly next?: Position;
}

/** What a read by id found (undefined: nothing), and the tenant revision it read at (as ListResult's). */
export interface Found {
  readonly stored: StoredDefinition | undefined;
  readonly revision: number;
}

/** What a change record says a write did to a version (migration 0015's definition_changes.kind). */
export type ChangeKind = "ADDED" | "MODIFIED" | "STATUS_CHANGED" | "LIVENESS_CHANGED";

/** One change record, with the definition it names as it is now (not as it was at `revision`). */
export interface ChangeRecord {
  readonly revision: number;
  readonly kind: ChangeKind;
  readonly stored: StoredDefinition;
}

/** A change record's revision and the bytes of its definition (ChangeLog.heads). */
export interface ChangeHead {
  readonly revision: number;
  readonly bytes: number;
}

/**
 * How much of the log is kept. A record goes when it is not among its tenant's last `count` revisions, or
 * when it was written more than `maxAgeMs` ago (and with it every older one, so what is kept is always
 * the tail of the log). 0 turns a limit off.
 */
export interface Retention {
  readonly count: number;
  readonly maxAgeMs: number;
}

export interface ChangeLog {
  /** The current revision of each of `tenants` (0 for one no write has counted): one statement. */
  revisions(tenants: readonly string[]): Promise<Map<string, number>>;
  /**
   * The tenant's change records with a revision in (`after`, `upTo`], in revision order, at most `limit`.
   * Each revision up to the tenant's counter has exactly one record until compaction removes it, and a
   * counter read committed means every record up to it is committed (the counter's row lock orders them).
   */
  read(tenant: string, after: number, upTo: number, limit: number): Promise<ChangeRecord[]>;
  /**
   * The same records' revisions with the bytes each one's definition holds (its JSON and its binary, counted as
   * twice the JSON: the binary is no larger), read without the definitions: what a reader bounded by bytes reads
   * first, to know how many records to read whole.
   */
  heads(tenant: string, after: number, upTo: number, limit: number): Promise<ChangeHead[]>;
  /** The oldest revision the tenant's log still holds; undefined when it holds none. */
  oldest(tenant: string): Promise<number | undefined>;
  /** Removes what `retention` no longer keeps, as of `now`; answers how many records went. */
  compact(retention: Retention, now: Date): Promise<number>;
}

/** A version the prober took from its schedule, with its liveness as stored (issue 44). */
export interface DueProbe {
  readonly tenant: string;
  readonly id: string;
  readonly now: LivenessNow;
}

/** A probe's end, as the schedule records it (ProbeSchedule.finishAll). */
export interface Finished {
  readonly tenant: string;
  readonly id: string;
  readonly failures: number;
  readonly dueAt: Date;
}

/**
 * The prober's schedule (issue 44, item 5; probe-schedule.ts): leases, in the database, of the versions due for a
 * probe, so that each is probed once per interval by all the processes on one database together.
 */
export interface ProbeSchedule {
  /**
   * Adds a row for each ACTIVE version that has none, at most `limit`, each due at a random time from `from` to
   * `spreadMs` after it; answers how many.
   */
  seed(from: Date, spreadMs: number, limit: number): Promise<number>;
  /**
   * Leases up to `limit` rows due at `now` and not leased (or whose lease has ended) to `owner` until `leaseUntil`,
   * oldest due first; rows another process is leasing meanwhile are skipped.
   */
  claim(owner: string, limit: number, now: Date, leaseUntil: Date): Promise<DueProbe[]>;
  /** The version's liveness as stored (NOT_PROBED, no failures, when it has no row). */
  current(tenant: string, id: string): Promise<LivenessNow>;
  /** After a probe: the failures in a row, the next due time; the lease is given back. Inserts a missing row. */
  finish(tenant: string, id: string, failures: number, dueAt: Date): Promise<void>;
  /** finish for each of `batch`, in one transaction. */
  finishAll(batch: readonly Finished[]): Promise<void>;
  /** How many scheduled versions are in each liveness state, every tenant together (metrics). */
  states(): Promise<Record<string, number>>;
}

/**
 * What a write knows of its tenant: its name and the prefix of its agent id sequence, which never change
 * once the tenant exists (no RPC deletes a tenant or sets its prefix again), so a process reads them once.
 */
export type WriteTenant = Pick<Tenant, "name" | "sequencePrefix">;

/**
 * The reads and writes of one write transaction on one tenant. Reads marked
 * "locks" lock what they find until the transaction ends, so it cannot change
 * underneath the caller. What they do not find is guarded by unique indexes:
 * when a racing writer inserts the same key, agent or externalAgentID, one of
 * the two inserts fails and its work runs again. An agent that
 * findAgentByName does not find stays absent until the transaction ends (no
 * agent can be created in the tenant meanwhile).
 */
export interface WriteTransaction {
  /** The tenant (found before the transaction's first statement: the tenant exists). */
  readonly tenant: WriteTenant;
  /** The instance holding `key`. Locks. */
  findByKey(key: UpsertKey): Promise<KeyedInstanceRef | undefined>;
  /** The instance with this 32-hex id. */
  findById(id: string): Promise<KeyedInstanceRef | undefined>;
  /** The instance with this 32-hex id, to change it. Locks (the instance, not its agent). */
  findByIdForUpdate(id: string): Promise<KeyedInstanceRef | undefined>;
  /** Every version of `agent`, newest first, to change them. Locks the agent, then the versions. */
  findVersionsForUpdate(agent: AgentRef): Promise<KeyedInstanceRef[]>;
  /**
   * Whether every version of `agent` is DEACTIVATED (it has none that is not). Locks the agent
   * first, as insert and setStatus do, so no status change of its versions commits before this
   * transaction does.
   */
  isAgentDeactivated(agent: AgentRef): Promise<boolean>;
  /** The newest instance of the agent with this `Agent_ID=...` reference id. */
  findNewestByReference(referenceId: string): Promise<InstanceRef | undefined>;
  /** The agent whose first version had this provider and name. Locks; when absent, locks the tenant's sequence. */
  findAgentByName(providerId: string, name: string): Promise<AgentRef | undefined>;
  /** The number of the agent that holds this externalAgentID for this provider. Locks. */
  findExternalIdOwner(providerId: string, externalAgentId: string): Promise<number | undefined>;
  /**
   * Creates an agent with the tenant's next sequence number (locking the
   * tenant's sequence until the transaction ends, so numbers have no gaps or
   * repeats). The tenant must have a sequence generator.
   */
  createAgent(providerId: string, name: string): Promise<AgentRef>;
  /** Records that `agentNumber` holds this externalAgentID for this provider. */
  claimExternalId(providerId: string, externalAgentId: string, agentNumber: number): Promise<void>;
  /**
   * Announces the new instance that insert() will store under `key`, before its agent is looked up
   * or created: `definition` as insert() will get it, but for its referenceId (which depends on the
   * agent). On MySQL, when findAgentByName then finds no agent, its row is inserted with no agent and
   * its search index written before the tenant's agent sequence is locked, so none of that work runs
   * while every other creator of an agent in the tenant waits (issue 24, item 2); insert() then sets
   * its agent and document. Optional; once called, the work must call insert() with the same
   * definition id or fail, or the write is refused.
   *
   * `index`, here and in insert() and update(): the definition's DefinitionIndex (its search terms and
   * full-text text) when the caller has made it already, as the service's admission has (issue 50: made
   * once per write, not again in each attempt of its transaction); it must be that of `definition`'s
   * content. Absent, it is made here, a text at a time.
   */
  prepareInsert(key: UpsertKey, definition: AgentDefinition, index?: DefinitionIndex): Promise<void>;
  /**
   * Stores a new instance of `agent` under `key`; `definition.id` is its new id. Both encodings
   * are made here, once. It is ACTIVE, revision 1, and its agent's latest version (taking the
   * flag from the others under the agent's lock).
   */
  insert(
    key: UpsertKey,
    agent: AgentRef,
    definition: AgentDefinition,
    index?: DefinitionIndex,
  ): Promise<StoredDefinition>;
  /** Replaces the content of `existing`, raising its revision; its id, key, agent, creation time and status stay. */
  update(existing: KeyedInstanceRef, definition: AgentDefinition, index?: DefinitionIndex): Promise<StoredDefinition>;
  /**
   * Sets the status of `versions` (all of one agent, found by findByIdForUpdate or
   * findVersionsForUpdate), raising each revision, then moves the agent's latest flag
   * to its newest version that is not DEACTIVATED. Answers the versions as stored now, in order.
   */
  setStatus(
    versions: readonly InstanceRef[],
    status: DefinitionStatus,
    statusMessage: string | null,
  ): Promise<StoredDefinition[]>;
  /**
   * Sets the published liveness of `version` (issue 44; migration 0021) to what `decide` makes of it as stored
   * now (locked on MySQL). A change of `state` or `drift` is a LIVENESS_CHANGED change (a tenant revision, the
   * version's modRevision; its row and documents are not written); anything else writes nothing. Answers the
   * version as stored after a change, else undefined.
   */
  setLiveness(version: InstanceRef, decide: LivenessDecision): Promise<StoredDefinition | undefined>;
}

/**
 * Where definitions live. Every call takes the tenant. Implementations
 * enforce the upsert key and both uniqueness rules in the database (unique
 * indexes, locks inside the transaction), and throw RegistryError:
 * `TENANT_NOT_FOUND` for an unknown tenant, `UNAVAILABLE` when the database is
 * unreachable, `CONFLICT` when retries run out. Nothing half-written survives
 * a failure.
 *
 * The reads are one round trip each: the tenant's existence is checked by the
 * same statement that reads (a tenant is never deleted).
 */
export interface AgentDefinitionRepository {
  /**
   * Runs `work` in one transaction on `tenant` and commits when it resolves.
   * Every version `work` changed takes the tenant's next revision, in the order it changed them, and a
   * change record, in the same transaction: the revisions are taken last, as it commits, so their order is
   * the order of commits. The `modRevision` of what `work`'s writes answered is set then.
   * When `work` throws, everything it wrote is rolled back and the error is
   * rethrown unchanged. Duplicate-key races and deadlocks roll back and run
   * `work` again from the start (a bounded number of times), so `work` must
   * have no effects outside the transaction.
   */
  write<T>(tenant: string, work: (tx: WriteTransaction) => Promise<T>): Promise<T>;
  /**
   * The instance with this 32-hex id in this tenant, or undefined; `TENANT_NOT_FOUND` when the tenant does
   * not exist.
   */
  get(tenant: string, id: string): Promise<StoredDefinition | undefined>;
  /** get, with the tenant revision the read was made at. */
  find(tenant: string, id: string): Promise<Found>;
  /**
   * The version the agent's `Agent_ID=...` reference id names: its newest that is not DEACTIVATED,
   * else its newest of all; undefined when no agent has it; `TENANT_NOT_FOUND` as get.
   */
  getNewestByReference(tenant: string, referenceId: string): Promise<StoredDefinition | undefined>;
  /** getNewestByReference, with the tenant revision the read was made at. */
  findNewestByReference(tenant: string, referenceId: string): Promise<Found>;
  /** A page of the versions of agent `agentNumber`, newest first; `TENANT_NOT_FOUND` as get. */
  listVersions(tenant: string, agentNumber: number, page: Page, work?: Work): Promise<ListResult>;
  /**
   * A page of the tenant's definitions that match `query` (filters, keywords, order, keyset), with `next`;
   * `TENANT_NOT_FOUND` as get.
   */
  search(tenant: string, query: ListQuery, work?: Work): Promise<ListResult>;
  /** The change log, as watchers read it (change-log.ts, change-reader.ts). */
  changeLog(): ChangeLog;
  /** The prober's schedule (probe-schedule.ts), on the writer's connections. */
  probeSchedule(): ProbeSchedule;
  /** The tenant's setup, or undefined when it has not been set up. */
  getTenant(tenant: string): Promise<Tenant | undefined>;
  /** Sets up a tenant; RegistryError `TENANT_EXISTS` when it exists. */
  createTenant(name: string, sequencePrefix: string | null): Promise<Tenant>;
  /** Every tenant, by name. */
  listTenants(): Promise<Tenant[]>;
  /** The tenants' settings and their providers' keys (issue 43). */
  tenantAdmin(): TenantAdminStore;
  /**
   * Resolves when the database answers a trivial query within a short time;
   * else throws RegistryError `UNAVAILABLE`. For health checks and readiness probes.
   */
  ping(): Promise<void>;
  /** How the connection pool is used right now, for metrics. */
  poolStats(): PoolStats;
  /** Write transactions run again since the repository opened, by cause, for metrics. */
  writeRetries(): WriteRetries;
  /** The reads by id and by reference since the repository opened, and the statements sent for them, for metrics. */
  keyedReads(): KeyedReads;
  /** Releases the connection pool. */
  close(): Promise<void>;
}

/**
 * What a tenant's admin keeps besides its definitions (issue 43, item 2): its settings and its providers'
 * public keys. Every method but providerKey and allSettings answers `TENANT_NOT_FOUND` for a tenant that has
 * not been set up.
 */
export interface TenantAdminStore {
  /** The tenant's settings, the defaults where it set none. */
  settings(tenant: string): Promise<TenantSettings>;
  /** The settings of the tenants that changed one, by tenant (the others have the defaults). */
  allSettings(): Promise<ReadonlyMap<string, TenantSettings>>;
  /** Sets the settings `change` names, in one transaction; answers every setting after. */
  updateSettings(tenant: string, change: Partial<TenantSettings>): Promise<TenantSettings>;
  /** The provider's keys, active and revoked, by kid (none: `[]`). */
  providerKeys(tenant: string, providerId: string): Promise<readonly ProviderKey[]>;
  /**
   * The provider's key `kid`, active or revoked (its `revokedAt` says), or undefined when the provider never
   * had it: what a signature's verification looks up (issue 43, items 3-5).
   */
  providerKey(tenant: string, providerId: string, kid: string): Promise<ProviderKey | undefined>;
  /**
   * Makes `keys` the provider's active set, in one transaction: keys it holds stay, new ones are added, active
   * ones left out are revoked (kept, marked). `VALIDATION_FAILED` naming `keys[i].kid` (i: the key's place in
   * `keys`; the message opens with that path; nothing written) when a
   * kid was revoked (`KID_REVOKED`) or names another key (`KID_TAKEN`).
   */
  setProviderKeys(tenant: string, providerId: string, keys: readonly KeyToHold[]): Promise<ProviderKeyChange>;
  /** Revokes the provider's key `kid` (a revoked one stays as it is); `NOT_FOUND` when it never had it. */
  revokeProviderKey(tenant: string, providerId: string, kid: string): Promise<ProviderKeyChange>;
}
