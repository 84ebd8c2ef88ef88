import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type { GetAgentDefinitionRequest, ListAgentDefinitionsRequest, ListAgentDefinitionVersionsRequest, UpsertAgentDefinitionRequest } from "../../gen/asor/v1/agent_definition_service_pb.js";
import {
  GetAgentDefinitionRequestSchema,
  ListAgentDefinitionsRequestSchema,
  ListAgentDefinitionVersionsRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { withDerivedFields } from "../domain/derived-fields.js";
import { type Issue, notFound } from "../domain/errors.js";
import { type HostIdentity, hostPlatformIssues } from "../domain/host-platform.js";
import type { AgentRef, StoredDefinition } from "../domain/records.js";
import { idForm, newDefinitionId, noSequenceGenerator, planUpsert, type UpsertFacts, upsertKey } from "../domain/upsert.js";
import { assertValid, contractIssues, crossFieldIssues, unknownFieldIssues } from "../domain/validation.js";
import type { AgentDefinitionRepository, ListResult, Page, WriteTransaction } from "../storage/repository.js";

export const DEFAULT_PAGE_SIZE = 20;

const BODY_PREFIX = "agentCardAndTools.";

/** Issues inside the definition are given relative to it: every transport shows the definition as the body. */
function relativeToBody(issue: Issue): Issue {
  if (!issue.path?.startsWith(BODY_PREFIX)) return issue;
  const path = issue.path.slice(BODY_PREFIX.length);
  return { ...issue, path, message: issue.message.startsWith(BODY_PREFIX) ? issue.message.slice(BODY_PREFIX.length) : issue.message };
}

/** Every contract issue of a request: unknown binary fields and protovalidate rules, in one pass. */
function requestIssues<Desc extends DescMessage>(schema: Desc, request: MessageShape<Desc>): Issue[] {
  return [...unknownFieldIssues(schema, request), ...contractIssues(schema, request)].map(relativeToBody);
}

/** A page of stored definitions, ready to answer. */
export interface DefinitionPage {
  readonly total: number;
  readonly data: readonly StoredDefinition[];
}

/** What an upsert stored, and whether it created the instance. */
export interface Upserted {
  readonly stored: StoredDefinition;
  readonly created: boolean;
}

/** The registry's operations, independent of any transport. Tenants are resolved by the caller. */
export interface RegistryService {
  list(tenant: string, request: ListAgentDefinitionsRequest): Promise<DefinitionPage>;
  get(tenant: string, request: GetAgentDefinitionRequest): Promise<StoredDefinition>;
  listVersions(tenant: string, request: ListAgentDefinitionVersionsRequest): Promise<DefinitionPage>;
  upsert(tenant: string, request: UpsertAgentDefinitionRequest): Promise<Upserted>;
}

export interface RegistryServiceOptions {
  readonly repository: AgentDefinitionRepository;
  /** The host system's provider and platform ids, for A161. */
  readonly host: HostIdentity;
}

const pageOf = (request: { limit?: number; offset?: number }): Page => ({ limit: request.limit ?? DEFAULT_PAGE_SIZE, offset: request.offset ?? 0 });
const toPage = ({ total, items }: ListResult): DefinitionPage => ({ total, data: items });

/**
 * Validation happens before any transaction is opened: a transaction holds a
 * pooled connection and row locks, and must not wait on work that needs
 * neither. Inside it the upsert reads what it decides on under lock, decides
 * with a pure function (planUpsert), and writes.
 */
export function createRegistryService({ repository, host }: RegistryServiceOptions): RegistryService {
  /** The version an id names: the 32-hex id of a version, or `Agent_ID=...` for the agent's newest version. */
  const findByAnyId = (tenant: string, id: string): Promise<StoredDefinition | undefined> => {
    const form = idForm(id);
    if (form === "instance") return repository.get(tenant, id);
    if (form === "reference") return repository.getNewestByReference(tenant, id);
    // Not an id we could have issued: get finds nothing in one round trip, and says so of an unknown tenant.
    return repository.get(tenant, id);
  };

  const linkedAgent = async (tx: WriteTransaction, id: string): Promise<AgentRef | "unknown"> => {
    const form = idForm(id);
    const record = form === "instance" ? await tx.findById(id) : form === "reference" ? await tx.findNewestByReference(id) : undefined;
    return record?.agent ?? "unknown";
  };

  const upsertIn = async (tx: WriteTransaction, def: AgentDefinition): Promise<Upserted> => {
    if (tx.tenant.sequencePrefix === null) throw noSequenceGenerator(tx.tenant.name);
    const key = upsertKey(def);
    const existing = await tx.findByKey(key);
    const linked = def.id === "" ? undefined : await linkedAgent(tx, def.id);
    const agentByName = existing === undefined && linked === undefined ? await tx.findAgentByName(key.providerId, key.name) : undefined;
    const externalAgentId = def.externalAgentId || undefined;
    const facts: UpsertFacts = {
      existingAgent: existing?.agent,
      linkedAgent: linked,
      agentByName,
      externalAgentId,
      externalIdOwner: externalAgentId === undefined ? undefined : await tx.findExternalIdOwner(key.providerId, externalAgentId),
    };
    const plan = planUpsert(facts);
    const agent = plan.agent === "new" ? await tx.createAgent(key.providerId, key.name) : plan.agent;
    if (plan.claimExternalId && externalAgentId !== undefined) await tx.claimExternalId(key.providerId, externalAgentId, agent.number);
    if (existing !== undefined) {
      return { stored: await tx.update(existing, withDerivedFields(def, existing.id, agent.referenceId)), created: false };
    }
    return { stored: await tx.insert(key, agent, withDerivedFields(def, newDefinitionId(), agent.referenceId)), created: true };
  };

  return {
    async list(tenant, request) {
      assertValid(requestIssues(ListAgentDefinitionsRequestSchema, request));
      return toPage(await repository.list(tenant, pageOf(request)));
    },

    async get(tenant, request) {
      assertValid(requestIssues(GetAgentDefinitionRequestSchema, request));
      const stored = await findByAnyId(tenant, request.id);
      if (stored === undefined) throw notFound(`Agent definition "${request.id}"`, "id");
      return stored;
    },

    async listVersions(tenant, request) {
      assertValid(requestIssues(ListAgentDefinitionVersionsRequestSchema, request));
      const record = await findByAnyId(tenant, request.id);
      if (record === undefined) throw notFound(`Agent "${request.id}"`, "id");
      return toPage(await repository.listVersions(tenant, record.agent.number, pageOf(request)));
    },

    async upsert(tenant, request) {
      const def = request.agentCardAndTools;
      assertValid([...requestIssues(UpsertAgentDefinitionRequestSchema, request), ...(def ? [...crossFieldIssues(def), ...hostPlatformIssues(def, host)] : [])]);
      if (def === undefined) throw new Error("unreachable: a missing definition is a validation issue");
      return repository.write(tenant, (tx) => upsertIn(tx, def));
    },
  };
}
