import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";

/** The upsert key of a definition within a tenant (SPEC.md §1.4, DESIGN.md §2). */
export interface UpsertKey {
  readonly name: string;
  readonly providerId: string;
  readonly version: string;
}

/** A tenant's setup. */
export interface Tenant {
  readonly name: string;
  /** The prefix of the tenant's agent id sequence; null when the tenant has no sequence generator. */
  readonly sequencePrefix: string | null;
  /** The number the next new agent will take (1 for a tenant without agents). */
  readonly nextAgentNumber: number;
  readonly createdAt: Date;
}

/**
 * An agent: the lineage that the versions (instances) of one agent share. It
 * is created with the first version and numbered from the tenant's sequence.
 */
export interface AgentRef {
  /** Its number in the tenant's sequence: 1, 2, 3... without gaps. */
  readonly number: number;
  /** `Agent_ID=<prefix><number>`. */
  readonly referenceId: string;
}

/** A stored definition (one version of one agent): what the client sent plus the registry's own fields. */
export interface AgentRecord {
  /** 32 lowercase hex characters. */
  readonly id: string;
  readonly tenant: string;
  /** The agent this instance is a version of. */
  readonly agent: AgentRef;
  /** The definition as it is answered: id, reference_id and derived fields included. */
  readonly definition: AgentDefinition;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export interface Page {
  readonly limit: number;
  readonly offset: number;
}

export interface ListResult {
  /** How many records match, across all pages. */
  readonly total: number;
  readonly items: readonly AgentRecord[];
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
  findByKey(key: UpsertKey): Promise<AgentRecord | undefined>;
  /** The instance with this 32-hex id. */
  findById(id: string): Promise<AgentRecord | undefined>;
  /** The newest instance of the agent with this `Agent_ID=...` reference id. */
  findNewestByReference(referenceId: string): Promise<AgentRecord | undefined>;
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
  /** Stores a new instance of `agent` under `key`; `definition.id` is its new id. */
  insert(key: UpsertKey, agent: AgentRef, definition: AgentDefinition): Promise<AgentRecord>;
  /** Replaces the content of `existing`; its id, key, agent and creation time stay. */
  update(existing: AgentRecord, definition: AgentDefinition): Promise<AgentRecord>;
}

/**
 * Where definitions live. Every call takes the tenant. Implementations
 * enforce the upsert key and both uniqueness rules in the database (unique
 * indexes, locks inside the transaction), and throw RegistryError:
 * `TENANT_NOT_FOUND` for an unknown tenant, `UNAVAILABLE` when the database is
 * unreachable, `CONFLICT` when retries run out. Nothing half-written survives
 * a failure.
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
  /** The instance with this 32-hex id in this tenant, or undefined. */
  get(tenant: string, id: string): Promise<AgentRecord | undefined>;
  /** The newest instance of the agent with this `Agent_ID=...` reference id, or undefined. */
  getNewestByReference(tenant: string, referenceId: string): Promise<AgentRecord | undefined>;
  /** A page of the tenant's definitions, oldest first (by creation). */
  list(tenant: string, page: Page): Promise<ListResult>;
  /** A page of the versions of agent `agentNumber`, newest first. */
  listVersions(tenant: string, agentNumber: number, page: Page): Promise<ListResult>;
  /** The tenant's setup, or undefined when it has not been set up. */
  getTenant(tenant: string): Promise<Tenant | undefined>;
  /** Sets up a tenant; RegistryError `TENANT_EXISTS` (kind already_exists) when it exists. */
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

/** How a repository's connection pool is used at one moment. */
export interface PoolStats {
  /** Connections lent out to a query or transaction. */
  readonly used: number;
  /** Open connections idle in the pool. */
  readonly free: number;
  /** Callers waiting for a connection; above zero for long, the pool is the bottleneck. */
  readonly pendingAcquires: number;
  /** The most connections the pool opens. */
  readonly max: number;
}
