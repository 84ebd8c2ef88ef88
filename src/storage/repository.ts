import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";

/** The upsert key of a definition within a tenant (SPEC.md §1.4, DESIGN.md §2). */
export interface UpsertKey {
  readonly name: string;
  readonly providerId: string;
  readonly version: string;
}

/** A stored definition: what the client sent plus the registry's own fields. */
export interface AgentRecord {
  /** 32 lowercase hex characters. */
  readonly id: string;
  readonly tenant: string;
  /** The definition as it is answered: id and derived fields included. */
  readonly definition: AgentDefinition;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** The result of an upsert. */
export interface UpsertResult {
  readonly record: AgentRecord;
  /** True when a new instance was created, false when one was updated in place. */
  readonly created: boolean;
}

/**
 * Decides, inside the upsert's transaction, what to write given the instance
 * that holds the key now (if any). The returned definition carries its `id`:
 * the existing instance's id on update, a new one on create. It may be called
 * more than once when a transaction is retried, so it must have no effects.
 */
export type UpsertDecision = (existing: AgentRecord | undefined) => Promise<AgentDefinition> | AgentDefinition;

export interface Page {
  readonly limit: number;
  readonly offset: number;
}

export interface ListResult {
  /** How many definitions the tenant has, across all pages. */
  readonly total: number;
  readonly items: readonly AgentRecord[];
}

/**
 * Where definitions live. Every call takes the tenant. Implementations
 * enforce the upsert key in the database (a unique index and a transaction),
 * retry duplicate-key races and deadlocks a bounded number of times, and throw
 * RegistryError: `TENANT_NOT_FOUND` for an unknown tenant, `UNAVAILABLE` when
 * the database is unreachable. Nothing half-written survives a failure.
 */
export interface AgentDefinitionRepository {
  /** Creates or updates the instance with `key` in one transaction. */
  upsert(tenant: string, key: UpsertKey, decide: UpsertDecision): Promise<UpsertResult>;
  /** The instance with this id in this tenant, or undefined. */
  get(tenant: string, id: string): Promise<AgentRecord | undefined>;
  /** A page of the tenant's definitions, oldest first (by creation, then id). */
  list(tenant: string, page: Page): Promise<ListResult>;
  /** True when the tenant has been set up. */
  tenantExists(tenant: string): Promise<boolean>;
  /** Releases the connection pool. */
  close(): Promise<void>;
}
