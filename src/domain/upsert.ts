import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type { AgentRecord, UpsertKey } from "../storage/repository.js";
import { withDerivedFields } from "./derived-fields.js";

/** The upsert key of a valid definition (SPEC.md §1.4): name, provider organization, version. */
export function upsertKey(def: AgentDefinition): UpsertKey {
  return { name: def.name, providerId: def.provider?.id ?? "", version: def.version };
}

/** A new definition id: 32 lowercase hex characters from a CSPRNG. */
export function newDefinitionId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  let hex = "";
  for (const byte of bytes) hex += byte.toString(16).padStart(2, "0");
  return hex;
}

/**
 * The upsert decision: the instance that holds the key keeps its id and takes
 * the new content; without one, a new instance is created with `newId`. The
 * `id` a client sends is read-only here (version linking arrives with agent
 * versions). Pure apart from `newId`.
 */
export function decideUpsert(
  existing: AgentRecord | undefined,
  incoming: AgentDefinition,
  newId: () => string = newDefinitionId,
): Promise<AgentDefinition> {
  return withDerivedFields(incoming, existing?.id ?? newId());
}
