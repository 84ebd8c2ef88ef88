/**
 * The registry's records, as the domain, the service and storage share them.
 * Storage implements them; nothing here does I/O.
 */

/** The upsert key of a definition within a tenant (docs/contract.md). */
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

/** The lifecycle status of a version (README, "Lifecycle"); any may follow any. */
export const DEFINITION_STATUSES = ["ACTIVE", "DEPRECATED", "DEACTIVATED"] as const;

/** One of DEFINITION_STATUSES. */
export type DefinitionStatus = (typeof DEFINITION_STATUSES)[number];

/**
 * The registry's own metadata of a version, kept apart from what the
 * publisher sent (columns beside the document) and spliced into every answer
 * as `meta`.
 */
export interface Lifecycle {
  /** 1 on create, +1 on every change of content or status. */
  readonly revision: number;
  /**
   * The tenant revision of the write that last changed this version (its content, status or latest flag): the
   * tenant's writes take revisions in commit order (docs/api.md, "Revisions").
   */
  readonly modRevision: number;
  readonly status: DefinitionStatus;
  /** Why the status was set; null when the caller said nothing. */
  readonly statusMessage: string | null;
  readonly statusChangedAt: Date;
  /** True for the newest version of its agent that is not DEACTIVATED. */
  readonly latest: boolean;
  /**
   * `meta.liveness` as protobuf JSON (issue 44: migration 0021's published columns); absent or null: never
   * probed (NOT_PROBED).
   */
  readonly liveness?: string | null;
}

/** One version of one agent, without its content: what a write decides on. */
export interface InstanceRef extends Lifecycle {
  /** 32 lowercase hex characters. */
  readonly id: string;
  readonly tenant: string;
  /** The agent this instance is a version of. */
  readonly agent: AgentRef;
  readonly createdAt: Date;
  /** When its content or status last changed. */
  readonly updatedAt: Date;
}

/** A version as a write finds it: with its upsert key, which an update by id must keep. */
export interface KeyedInstanceRef extends InstanceRef {
  readonly key: UpsertKey;
  /** Its content as stored, in protobuf binary: an update that would write the same bytes changes nothing. */
  readonly binary: Uint8Array;
}

/**
 * A stored definition, ready to answer: both encodings are kept as written
 * (derived fields included), so a read sends bytes and never rebuilds the
 * document.
 */
export interface StoredDefinition extends InstanceRef {
  /** The definition as protobuf JSON, UTF-8: exactly what a JSON answer carries. */
  readonly json: Uint8Array;
  /** The same definition in protobuf binary: exactly what a binary answer carries. */
  readonly binary: Uint8Array;
}

/**
 * Why a write transaction was run again: `certification`, a deadlock error (1213) at COMMIT, which on a
 * Galera cluster is a lost certification (another node committed a row this one changed); `deadlock`,
 * the same error on a statement (an InnoDB deadlock, or on Galera a transaction aborted for another
 * node's write); `lock_wait_timeout` (1205); `duplicate_key` (another writer inserted the same key
 * first); `busy` (SQLite's write lock); `node_failed` (its database node failed before COMMIT: run
 * again on the next host); `triggers_reloaded` (MySQL: a table's triggers failed to load on the node,
 * which then reloaded them: storage/run/broken-triggers.ts).
 */
export type WriteRetryCause =
  | "certification"
  | "deadlock"
  | "lock_wait_timeout"
  | "duplicate_key"
  | "busy"
  | "node_failed"
  | "triggers_reloaded";

/** Every WriteRetryCause. */
export const WRITE_RETRY_CAUSES: readonly WriteRetryCause[] = [
  "certification",
  "deadlock",
  "lock_wait_timeout",
  "duplicate_key",
  "busy",
  "node_failed",
  "triggers_reloaded",
];

/** Write transactions run again since the repository opened, by cause. */
export type WriteRetries = Readonly<Record<WriteRetryCause, number>>;

/** The hot reads by key since the repository opened, and the statements that answered them. */
export interface KeyedReadCount {
  readonly reads: number;
  readonly statements: number;
}

/**
 * The hot reads by key, by kind: `by_id` (a GET by id), `by_reference` (a GET by `Agent_ID=`). On MySQL the
 * reads asked together go in one statement (storage/run/reads.ts), so statements can be fewer than reads.
 */
export type KeyedReads = Readonly<Record<"by_id" | "by_reference", KeyedReadCount>>;

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
  /**
   * Costly searches waiting at the search gate (SEARCH_MAX_CONCURRENT, SEARCH_MAX_PER_TENANT), holding no
   * connection.
   */
  readonly searchesWaiting: number;
}
