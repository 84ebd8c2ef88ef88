import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { deactivatedWrite, issueAt, RegistryError } from "./errors.js";
import type { AgentRef, UpsertKey } from "./records.js";

/** The upsert key of a valid definition (docs/contract.md): name, provider organization, version. */
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

/** A version's id as the registry issues it: 32 lowercase hex characters (the one pattern of it). */
export const INSTANCE_ID = /^[0-9a-f]{32}$/;

/**
 * An instance reference (`provider.id`, `platform.id`, `executionMode.id`): an instance id, or a
 * non-whitespace `<key>=<value>`.
 */
export const INSTANCE_REFERENCE = new RegExp(`^(?:${INSTANCE_ID.source.slice(1, -1)}|[^\\s=]+=\\S+)$`);

/** The forms of the id that names a version or an agent. */
export type IdForm = "instance" | "reference" | "other";

/** A 32-hex id names one version; an `Agent_ID=...` reference names an agent (its newest version). */
export function idForm(id: string): IdForm {
  if (INSTANCE_ID.test(id)) return "instance";
  if (/^Agent_ID=\S+$/.test(id)) return "reference";
  return "other";
}

/** What the upsert found, under lock, before deciding. */
export interface UpsertFacts {
  /** The agent of the instance that holds the key now, if one does. */
  readonly existingAgent: AgentRef | undefined;
  /** The agent the request's `id` links to; "unknown" when it names nothing; undefined without an `id`. */
  readonly linkedAgent: AgentRef | "unknown" | undefined;
  /** The agent whose first version had this provider and name, if any. */
  readonly agentByName: AgentRef | undefined;
  /** The definition's externalAgentID, if it has one. */
  readonly externalAgentId: string | undefined;
  /** The number of the agent that holds that externalAgentID for this provider, if any. */
  readonly externalIdOwner: number | undefined;
  /** The instance that holds the key is DEACTIVATED. */
  readonly existingDeactivated: boolean;
  /**
   * Every version of the agent a new version would join (the linked one, else
   * the one with the name) is DEACTIVATED, as read under that agent's lock.
   * Only asked when the caller may not reactivate; false otherwise.
   */
  readonly agentDeactivated: boolean;
  /** The caller may bring a deactivated agent or version back (holds Setup: Agents, the domain of PATCH .../status). */
  readonly mayReactivate: boolean;
}

/** What to write. */
export interface UpsertPlan {
  /** Update the instance that holds the key, or insert a new version. */
  readonly write: "update" | "insert";
  /** The agent the instance belongs to, or "new" for a new agent from the tenant's sequence. */
  readonly agent: AgentRef | "new";
  /** Record the externalAgentID as this agent's. */
  readonly claimExternalId: boolean;
}

/**
 * The upsert decision (docs/decisions.md: the upsert key, versions, A3015):
 * - the instance holding the key is updated in place, and keeps its id and agent;
 * - otherwise a new version joins the agent the request `id` names, else the
 *   agent with the same provider and name, else a new agent;
 * - an `id` that names nothing, or another agent than the key's instance, is refused;
 * - an externalAgentID held by another agent of the same provider is refused (A3015);
 * - deactivation is a control (README, "Lifecycle"): a caller that may not
 *   reactivate (no Setup: Agents) can neither change a DEACTIVATED version
 *   nor add a version to an agent whose versions are all DEACTIVATED, which
 *   would make it ACTIVE and latest again (AGENT_DEACTIVATED, 403).
 */
export function planUpsert(facts: UpsertFacts): UpsertPlan {
  const linked = facts.linkedAgent;
  if (linked === "unknown") {
    throw new RegistryError("VALIDATION_FAILED", "The id names no agent definition in this tenant.", [
      issueAt(
        "id",
        "UNKNOWN_AGENT",
        "id names no version and no agent in this tenant; leave it out to create a new agent.",
      ),
    ]);
  }
  const existing = facts.existingAgent;
  if (existing !== undefined && linked !== undefined && linked.number !== existing.number) {
    const message =
      `id names agent ${linked.referenceId}, but this name, provider and version is already a ` +
      `version of ${existing.referenceId}.`;
    throw new RegistryError("VALIDATION_FAILED", message, [issueAt("id", "AGENT_MISMATCH", message)]);
  }
  const agent = existing ?? linked ?? facts.agentByName ?? "new";
  if (!facts.mayReactivate) {
    if (existing !== undefined && facts.existingDeactivated)
      throw deactivatedWrite(`The version with this name, provider and version (of agent ${existing.referenceId})`);
    if (existing === undefined && agent !== "new" && facts.agentDeactivated)
      throw deactivatedWrite(`Every version of agent ${agent.referenceId}`);
  }
  const owner = facts.externalIdOwner;
  if (facts.externalAgentId !== undefined && owner !== undefined && (agent === "new" || owner !== agent.number)) {
    const message = `externalAgentID "${facts.externalAgentId}" is already used by another agent of this provider.`;
    throw new RegistryError("A3015", message, [issueAt("externalAgentID", "A3015", message)]);
  }
  return {
    write: existing !== undefined ? "update" : "insert",
    agent,
    claimExternalId: facts.externalAgentId !== undefined && owner === undefined,
  };
}

/** A2849: the tenant cannot register agents before it has a sequence generator. */
export function noSequenceGenerator(tenant: string): RegistryError {
  const message = `Tenant "${tenant}" has no agent id sequence generator; create one before registering agents.`;
  return new RegistryError("A2849", message, [{ code: "A2849", message }]);
}
