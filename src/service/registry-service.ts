import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type {
  GetAgentDefinitionRequest,
  ListAgentDefinitionsRequest,
  UpsertAgentDefinitionRequest,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import {
  GetAgentDefinitionRequestSchema,
  ListAgentDefinitionsRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { notFound, tenantNotFound } from "../domain/errors.js";
import { decideUpsert, upsertKey } from "../domain/upsert.js";
import type { Issue } from "../domain/errors.js";
import { assertValid, contractIssues, crossFieldIssues, unknownFieldIssues } from "../domain/validation.js";
import type { AgentDefinitionRepository } from "../storage/repository.js";

export const DEFAULT_PAGE_SIZE = 20;

const BODY_PREFIX = "agentCardAndTools.";

function relativeToBody(issue: Issue): Issue {
  if (!issue.path?.startsWith(BODY_PREFIX)) return issue;
  const path = issue.path.slice(BODY_PREFIX.length);
  return { ...issue, path, message: issue.message.startsWith(BODY_PREFIX) ? issue.message.slice(BODY_PREFIX.length) : issue.message };
}

/** A page of definitions. */
export interface DefinitionPage {
  readonly total: number;
  readonly data: AgentDefinition[];
}

/** The registry's operations, independent of any transport. Tenants are resolved by the caller. */
export interface RegistryService {
  list(tenant: string, request: ListAgentDefinitionsRequest): Promise<DefinitionPage>;
  get(tenant: string, request: GetAgentDefinitionRequest): Promise<AgentDefinition>;
  upsert(tenant: string, request: UpsertAgentDefinitionRequest): Promise<{ definition: AgentDefinition; created: boolean }>;
}

export interface RegistryServiceOptions {
  readonly repository: AgentDefinitionRepository;
}

/**
 * Validation happens here, before any transaction is opened: a transaction
 * holds a pooled connection and row locks, and must not wait on work that
 * needs neither (see also the repository's retry of whole transactions).
 */
export function createRegistryService({ repository }: RegistryServiceOptions): RegistryService {
  const requireTenant = async (tenant: string): Promise<void> => {
    if (!(await repository.tenantExists(tenant))) throw tenantNotFound(tenant);
  };

  return {
    async list(tenant, request) {
      assertValid([...unknownFieldIssues(ListAgentDefinitionsRequestSchema, request), ...contractIssues(ListAgentDefinitionsRequestSchema, request)]);
      await requireTenant(tenant);
      const page = { limit: request.limit ?? DEFAULT_PAGE_SIZE, offset: request.offset ?? 0 };
      const { total, items } = await repository.list(tenant, page);
      return { total, data: items.map((r) => r.definition) };
    },

    async get(tenant, request) {
      assertValid([...unknownFieldIssues(GetAgentDefinitionRequestSchema, request), ...contractIssues(GetAgentDefinitionRequestSchema, request)]);
      await requireTenant(tenant);
      const record = await repository.get(tenant, request.id);
      if (record === undefined) throw notFound(`Agent definition "${request.id}"`, "id");
      return record.definition;
    },

    async upsert(tenant, request) {
      const def = request.agentCardAndTools;
      // One protovalidate pass over the request; paths inside the definition
      // are given relative to it, as every transport shows the definition as
      // the body.
      assertValid([
        ...unknownFieldIssues(UpsertAgentDefinitionRequestSchema, request).map(relativeToBody),
        ...contractIssues(UpsertAgentDefinitionRequestSchema, request).map(relativeToBody),
        ...(def ? crossFieldIssues(def) : []),
      ]);
      if (def === undefined) throw new Error("unreachable: a missing definition is a validation issue");
      const { record, created } = await repository.upsert(tenant, upsertKey(def), (existing) => decideUpsert(existing, def));
      return { definition: record.definition, created };
    },
  };
}
