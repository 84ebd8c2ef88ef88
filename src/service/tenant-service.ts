import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { CreateTenantRequest, Tenant as TenantMessage } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { CreateTenantRequestSchema, TenantSchema } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { assertValid, contractIssues, unknownFieldIssues } from "../domain/validation.js";
import type { AgentDefinitionRepository, Tenant } from "../storage/repository.js";

/** Tenant setup: the administrative operations, for the admin RPC and the admin command. */
export interface TenantService {
  create(request: CreateTenantRequest): Promise<TenantMessage>;
  list(): Promise<TenantMessage[]>;
}

export function tenantMessage(tenant: Tenant): TenantMessage {
  return create(TenantSchema, {
    name: tenant.name,
    ...(tenant.sequencePrefix === null ? {} : { sequencePrefix: tenant.sequencePrefix }),
    nextAgentNumber: tenant.nextAgentNumber,
    createTime: timestampFromDate(tenant.createdAt),
  });
}

export function createTenantService(repository: AgentDefinitionRepository): TenantService {
  return {
    async create(request) {
      assertValid([
        ...unknownFieldIssues(CreateTenantRequestSchema, request),
        ...contractIssues(CreateTenantRequestSchema, request),
      ]);
      return tenantMessage(await repository.createTenant(request.name, request.sequencePrefix ?? null));
    },
    async list() {
      return (await repository.listTenants()).map(tenantMessage);
    },
  };
}
