/**
 * What the storage suites share: definitions, and `save`, the write the
 * service does, in its simplest form (find the key; join the agent of the same
 * provider and name, else create one; check and claim the externalAgentID;
 * insert or update), counting how often `write` ran it.
 */
import { randomBytes } from "node:crypto";
import { clone, create } from "@bufbuild/protobuf";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { RegistryError } from "../../src/domain/errors.js";
import type { AgentDefinitionRepository, AgentRecord, UpsertKey, WriteTransaction } from "../../src/storage/repository.js";

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

/** The definition as the service stores it: with its instance id and its agent's reference id. */
export function stored(def: AgentDefinition, id: string, referenceId: string): AgentDefinition {
  const copy = clone(AgentDefinitionSchema, def);
  copy.id = id;
  copy.referenceId = referenceId;
  return copy;
}

export interface Saved {
  readonly record: AgentRecord;
  readonly created: boolean;
  /** How often `write` ran the work: 1 when no race was lost. */
  readonly attempts: number;
}

export interface SaveOptions {
  /** Runs inside the first attempt at a named point, e.g. to line racing writers up. */
  readonly pause?: (point: "agent-looked-up" | "owner-looked-up") => Promise<void>;
}

/** Creates or updates `def` in `tenant` the way the service does. */
export async function save(repo: AgentDefinitionRepository, def: AgentDefinition, tenant = "default", options: SaveOptions = {}): Promise<Saved> {
  let attempts = 0;
  const result = await repo.write(tenant, async (tx) => {
    attempts++;
    const pause = attempts === 1 ? options.pause : undefined;
    return upsertIn(tx, def, pause);
  });
  return { ...result, attempts };
}

async function upsertIn(tx: WriteTransaction, def: AgentDefinition, pause: SaveOptions["pause"]): Promise<Omit<Saved, "attempts">> {
  const key = keyOf(def);
  const existing = await tx.findByKey(key);
  let agent = existing?.agent ?? (await tx.findAgentByName(key.providerId, key.name));
  await pause?.("agent-looked-up");
  let claim = false;
  if (def.externalAgentId !== undefined) {
    const owner = await tx.findExternalIdOwner(key.providerId, def.externalAgentId);
    await pause?.("owner-looked-up");
    if (owner !== undefined && owner !== agent?.number) {
      const message = `externalAgentID "${def.externalAgentId}" belongs to another agent of this provider.`;
      throw new RegistryError("invalid", "A3015", message, [{ code: "A3015", message, field: "externalAgentID", path: "externalAgentID" }]);
    }
    claim = owner === undefined;
  }
  agent ??= await tx.createAgent(key.providerId, key.name);
  if (claim) await tx.claimExternalId(key.providerId, def.externalAgentId!, agent.number);
  if (existing !== undefined) {
    return { created: false, record: await tx.update(existing, stored(def, existing.id, agent.referenceId)) };
  }
  return { created: true, record: await tx.insert(key, agent, stored(def, newId(), agent.referenceId)) };
}

/** Resolves once `parties` callers are waiting on it; rejects after `timeoutMillis` so a broken race fails instead of hanging. */
export function barrier(parties: number, timeoutMillis = 10_000): () => Promise<void> {
  let waiting = 0;
  let release!: () => void;
  let fail!: (error: Error) => void;
  const all = new Promise<void>((resolve, reject) => {
    release = resolve;
    fail = reject;
  });
  all.catch(() => undefined); // handled by whoever waits; no unhandled rejection when nobody does
  const timer = setTimeout(() => fail(new Error(`barrier: ${waiting} of ${parties} arrived`)), timeoutMillis);
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
