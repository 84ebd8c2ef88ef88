/**
 * What the storage suites share: definitions, the service's real upsert on a
 * repository, and a decorator of the real repository's `write` that counts
 * its attempts and lets a test hold a writer still at a chosen call.
 */
import { randomBytes } from "node:crypto";
import { clone, create, fromBinary, fromJsonString } from "@bufbuild/protobuf";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { UpsertAgentDefinitionRequestSchema } from "../../gen/asor/v1/agent_definition_service_pb.js";
import type { HostIdentity } from "../../src/domain/host-platform.js";
import type { Upserted } from "../../src/service/registry-service.js";
import { createRegistryService } from "../../src/service/registry-service.js";
import type {
  AgentDefinitionRepository,
  StoredDefinition,
  UpsertKey,
  WriteTransaction,
} from "../../src/storage/repository.js";

export function newId(): string {
  return randomBytes(16).toString("hex");
}

/** What a test varies; the rest is a valid definition. */
export interface DefinitionFields {
  id?: string;
  name?: string;
  description?: string;
  version?: string;
  provider?: { id: string };
  externalAgentId?: string;
}

export function definition(init: DefinitionFields = {}): AgentDefinition {
  return create(AgentDefinitionSchema, {
    name: "Expense Agent",
    description: "Files expense reports.",
    url: "https://agents.example.com/expense",
    version: "1.0.0",
    provider: { id: "Provider=Acme" },
    skills: [{ id: "file", name: "File", description: "Files one report." }],
    ...init,
  });
}

export function keyOf(def: AgentDefinition): UpsertKey {
  return { name: def.name, providerId: def.provider?.id ?? "", version: def.version };
}

/**
 * `def` with an instance id and its agent's reference id, for tests that call WriteTransaction.insert/update
 * themselves.
 */
export function withIds(def: AgentDefinition, id: string, referenceId: string): AgentDefinition {
  const copy = clone(AgentDefinitionSchema, def);
  copy.id = id;
  copy.referenceId = referenceId;
  return copy;
}

/** The definition a stored JSON encoding holds. */
export function fromJsonBytes(stored: StoredDefinition): AgentDefinition {
  return fromJsonString(AgentDefinitionSchema, new TextDecoder("utf-8", { fatal: true }).decode(stored.json));
}

/** The definition a stored binary encoding holds. */
export function fromBinaryBytes(stored: StoredDefinition): AgentDefinition {
  return fromBinary(AgentDefinitionSchema, stored.binary);
}

/** Bytes as a Buffer, so that a Uint8Array written and a Buffer read compare by content. */
export function bytes(of: Uint8Array): Buffer {
  return Buffer.from(of.buffer, of.byteOffset, of.byteLength);
}

/** The defaults of src/config.ts (HOST_PROVIDER_ID, HOST_PLATFORM_ID). */
export const host: HostIdentity = { providerId: "Provider=HOST", platformId: "Platform=HOST" };

export interface Saved extends Upserted {
  /** How often `write` ran the service's work: 1 when no race was lost. */
  readonly attempts: number;
}

export interface SaveOptions {
  /**
   * Runs after each WriteTransaction call has answered, with the number of
   * the attempt (1 for the first run of the work), and holds the writer until
   * it resolves (e.g. to line racing writers up).
   */
  readonly after?: (call: keyof WriteTransaction, attempt: number) => Promise<void> | void;
}

/**
 * Creates or updates `def` in `tenant` with the service's real upsert (as a caller with Setup: Agents),
 * counting how often `write` ran it.
 */
export async function save(
  repository: AgentDefinitionRepository,
  def: AgentDefinition,
  tenant = "default",
  options: SaveOptions = {},
): Promise<Saved> {
  let attempts = 0;
  const counting = withWriteHook(repository, (tx) => {
    const attempt = ++attempts;
    const after = options.after;
    return after === undefined ? tx : pausing(tx, (call) => after(call, attempt));
  });
  const service = createRegistryService({ repository: counting, host });
  const upserted = await service.upsert(
    tenant,
    create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: def }),
    { mayReactivate: true },
  );
  return { ...upserted, attempts };
}

/**
 * The real repository, with every transaction `write` hands out passed
 * through `hook` first (once per attempt); everything else is delegated as is.
 */
export function withWriteHook(
  repository: AgentDefinitionRepository,
  hook: (tx: WriteTransaction) => WriteTransaction,
): AgentDefinitionRepository {
  return {
    write: (tenant, work) => repository.write(tenant, (tx) => work(hook(tx))),
    get: (tenant, id) => repository.get(tenant, id),
    getNewestByReference: (tenant, referenceId) => repository.getNewestByReference(tenant, referenceId),
    find: (tenant, id) => repository.find(tenant, id),
    findNewestByReference: (tenant, referenceId) => repository.findNewestByReference(tenant, referenceId),
    listVersions: (tenant, agentNumber, page) => repository.listVersions(tenant, agentNumber, page),
    search: (tenant, query) => repository.search(tenant, query),
    getTenant: (tenant) => repository.getTenant(tenant),
    changeLog: () => repository.changeLog(),
    probeSchedule: () => repository.probeSchedule(),
    createTenant: (name, sequencePrefix) => repository.createTenant(name, sequencePrefix),
    listTenants: () => repository.listTenants(),
    tenantAdmin: () => repository.tenantAdmin(),
    ping: () => repository.ping(),
    poolStats: () => repository.poolStats(),
    writeRetries: () => repository.writeRetries(),
    keyedReads: () => repository.keyedReads(),
    close: () => repository.close(),
  };
}

/** `tx`, with `after` awaited after each of its calls answers. */
function pausing(
  tx: WriteTransaction,
  after: (call: keyof WriteTransaction) => Promise<void> | void,
): WriteTransaction {
  return new Proxy(tx, {
    get(target, property) {
      // The real transaction keeps its state in private fields: call its methods on it, not on the proxy.
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        const result: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        await after(property as keyof WriteTransaction);
        return result;
      };
    },
  });
}

/**
 * Resolves once `parties` callers are waiting on it; rejects after `timeoutMs` so a broken race fails
 * instead of hanging.
 */
export function barrier(parties: number, timeoutMs = 10_000): () => Promise<void> {
  let waiting = 0;
  let release!: () => void;
  let fail!: (error: Error) => void;
  const all = new Promise<void>((resolve, reject) => {
    release = resolve;
    fail = reject;
  });
  all.catch(() => undefined); // handled by whoever waits; no unhandled rejection when nobody does
  const timer = setTimeout(() => fail(new Error(`barrier: ${waiting} of ${parties} arrived`)), timeoutMs);
  timer.unref();
  return () => {
    waiting++;
    if (waiting === parties) {
      clearTimeout(timer);
      release();
    }
    return all;
  };
}

export function sleep(millis: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, millis));
}
