import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type { AgentRef, InstanceRef, PoolStats, StoredDefinition, Tenant, UpsertKey } from "../domain/records.js";

export type { AgentRef, InstanceRef, PoolStats, StoredDefinition, Tenant, UpsertKey } from "../domain/records.js";

export interface Page {
  readonly limit: number;
  readonly offset: number;
}

export interface ListResult {
  /** How many records match, across all pages. */
  readonly total: number;
  readonly items: readonly StoredDefinition[];
}

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
  /** The tenant, read when the transaction began. */
  readonly tenant: Tenant;
  /** The instance holding `key`. Locks. */
  findByKey(key: UpsertKey): Promise<InstanceRef | undefined>;
  /** The instance with this 32-hex id. */
  findById(id: string): Promise<InstanceRef | undefined>;
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
  /** Stores a new instance of `agent` under `key`; `definition.id` is its new id. Both encodings are made here, once. */
  insert(key: UpsertKey, agent: AgentRef, definition: AgentDefinition): Promise<StoredDefinition>;
  /** Replaces the content of `existing`; its id, key, agent and creation time stay. */
  update(existing: InstanceRef, definition: AgentDefinition): Promise<StoredDefinition>;
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
   * When `work` throws, everything it wrote is rolled back and the error is
   * rethrown unchanged. Duplicate-key races and deadlocks roll back and run
   * `work` again from the start (a bounded number of times), so `work` must
   * have no effects outside the transaction.
   */
  write<T>(tenant: string, work: (tx: WriteTransaction) => Promise<T>): Promise<T>;
  /** The instance with this 32-hex id in this tenant, or undefined; `TENANT_NOT_FOUND` when the tenant does not exist. */
  get(tenant: string, id: string): Promise<StoredDefinition | undefined>;
  /** The newest instance of the agent with this `Agent_ID=...` reference id, or undefined; `TENANT_NOT_FOUND` as get. */
  getNewestByReference(tenant: string, referenceId: string): Promise<StoredDefinition | undefined>;
  /** A page of the tenant's definitions, oldest first (by creation); `TENANT_NOT_FOUND` as get. */
  list(tenant: string, page: Page): Promise<ListResult>;
  /** A page of the versions of agent `agentNumber`, newest first; `TENANT_NOT_FOUND` as get. */
  listVersions(tenant: string, agentNumber: number, page: Page): Promise<ListResult>;
  /** The tenant's setup, or undefined when it has not been set up. */
  getTenant(tenant: string): Promise<Tenant | undefined>;
  /** Sets up a tenant; RegistryError `TENANT_EXISTS` when it exists. */
  createTenant(name: string, sequencePrefix: string | null): Promise<Tenant>;
  /** Every tenant, by name. */
  listTenants(): Promise<Tenant[]>;
  /**
   * Resolves when the database answers a trivial query within a short time;
   * else throws RegistryError `UNAVAILABLE`. For health checks and readiness probes.
   */
  ping(): Promise<void>;
  /** How the connection pool is used right now, for metrics. */
  poolStats(): PoolStats;
  /** Releases the connection pool. */
  close(): Promise<void>;
}
