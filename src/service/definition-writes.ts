/**
 * The registry service's writes inside their transaction (registry-service.ts validates and admits them first):
 * each reads what it decides on under lock, decides with a pure function (planUpsert), and writes.
 */
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type {
  UpdateAgentDefinitionRequest,
  UpsertAgentDefinitionRequest,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { withDerivedFields } from "../domain/derived-fields.js";
import { notFound } from "../domain/errors.js";
import { checkCreateOnly, checkIfMatch, checkKeyKept } from "../domain/lifecycle.js";
import type { AgentRef, StoredDefinition } from "../domain/records.js";
import type { DefinitionIndex } from "../domain/search-terms.js";
import {
  idForm,
  newDefinitionId,
  noSequenceGenerator,
  planUpsert,
  type UpsertFacts,
  upsertKey,
} from "../domain/upsert.js";
import type { WriteTransaction } from "../storage/repository.js";

/** What an upsert stored, and whether it created the instance. */
export interface Upserted {
  readonly stored: StoredDefinition;
  readonly created: boolean;
}

/**
 * What the caller of a write may do beyond the write itself, as its operation
 * read it from the caller's token. Absent: the least (a caller that may not reactivate).
 */
export interface WriteAuthority {
  /**
   * May change DEACTIVATED versions and add versions to an agent whose versions all are (Setup: Agents, the
   * domain of PATCH .../status).
   */
  readonly mayReactivate: boolean;
}

/**
 * The version an id names inside a write, as the service's reads find it outside one; undefined for a form we
 * never issue.
 */
export function findInWrite(tx: WriteTransaction, id: string) {
  const form = idForm(id);
  return form === "instance"
    ? tx.findById(id)
    : form === "reference"
      ? tx.findNewestByReference(id)
      : Promise.resolve(undefined);
}

async function linkedAgent(tx: WriteTransaction, id: string): Promise<AgentRef | "unknown"> {
  return (await findInWrite(tx, id))?.agent ?? "unknown";
}

/** An upsert's work inside its write: reads what it decides on under lock, plans (planUpsert), writes. */
export async function upsertIn(
  tx: WriteTransaction,
  def: AgentDefinition,
  index: DefinitionIndex,
  conditions: Pick<UpsertAgentDefinitionRequest, "etag" | "createOnly">,
  { mayReactivate }: WriteAuthority,
): Promise<Upserted> {
  if (tx.tenant.sequencePrefix === null) throw noSequenceGenerator(tx.tenant.name);
  const key = upsertKey(def);
  const existing = await tx.findByKey(key);
  // The conditions hold on the key's instance as locked here, so nothing can change it before we write.
  checkIfMatch(conditions.etag, existing, "this name, provider and version");
  checkCreateOnly(conditions.createOnly, existing);
  const linked = def.id === "" ? undefined : await linkedAgent(tx, def.id);
  // Announced before its agent is looked up: for a new agent, its row and search index are written
  // before the tenant's sequence is locked (WriteTransaction.prepareInsert), so that work no longer
  // holds up the tenant's other creators of agents.
  const newId = existing === undefined && linked !== "unknown" ? newDefinitionId() : undefined;
  if (newId !== undefined) await tx.prepareInsert(key, withDerivedFields(def, newId, ""), index);
  const agentByName =
    existing === undefined && linked === undefined ? await tx.findAgentByName(key.providerId, key.name) : undefined;
  const externalAgentId = def.externalAgentId || undefined;
  // The agent a new version would join, read under its lock; only a caller that may not reactivate is refused by it.
  const joins = existing === undefined && linked !== "unknown" ? (linked ?? agentByName) : undefined;
  const facts: UpsertFacts = {
    existingAgent: existing?.agent,
    linkedAgent: linked,
    agentByName,
    externalAgentId,
    externalIdOwner:
      externalAgentId === undefined ? undefined : await tx.findExternalIdOwner(key.providerId, externalAgentId),
    existingDeactivated: existing?.status === "DEACTIVATED",
    agentDeactivated: !mayReactivate && joins !== undefined && (await tx.isAgentDeactivated(joins)),
    mayReactivate,
  };
  const plan = planUpsert(facts);
  const agent = plan.agent === "new" ? await tx.createAgent(key.providerId, key.name) : plan.agent;
  if (plan.claimExternalId && externalAgentId !== undefined)
    await tx.claimExternalId(key.providerId, externalAgentId, agent.number);
  if (existing !== undefined) {
    return {
      stored: await tx.update(existing, withDerivedFields(def, existing.id, agent.referenceId), index),
      created: false,
    };
  }
  return {
    stored: await tx.insert(key, agent, withDerivedFields(def, newId ?? newDefinitionId(), agent.referenceId), index),
    created: true,
  };
}

/** A PUT's work inside its write: the version by its id, locked, replaced under the upsert's rules; keeps its agent. */
export async function updateIn(
  tx: WriteTransaction,
  request: UpdateAgentDefinitionRequest,
  def: AgentDefinition,
  index: DefinitionIndex,
  mayReactivate: boolean,
): Promise<StoredDefinition> {
  const existing = await tx.findByIdForUpdate(request.id);
  if (existing === undefined) throw notFound(`Agent definition "${request.id}"`, "id");
  checkIfMatch(request.etag, existing, `Agent definition ${existing.id}`);
  checkKeyKept(upsertKey(def), existing.key);
  // The externalAgentID rules are the upsert's: the version keeps its agent.
  const externalAgentId = def.externalAgentId || undefined;
  const owner =
    externalAgentId === undefined ? undefined : await tx.findExternalIdOwner(existing.key.providerId, externalAgentId);
  const plan = planUpsert({
    existingAgent: existing.agent,
    linkedAgent: undefined,
    agentByName: undefined,
    externalAgentId,
    externalIdOwner: owner,
    existingDeactivated: existing.status === "DEACTIVATED",
    agentDeactivated: false,
    mayReactivate,
  });
  if (plan.claimExternalId && externalAgentId !== undefined)
    await tx.claimExternalId(existing.key.providerId, externalAgentId, existing.agent.number);
  return tx.update(existing, withDerivedFields(def, existing.id, existing.agent.referenceId), index);
}
