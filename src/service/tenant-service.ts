import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type {
  CreateTenantRequest,
  GetTenantRequest,
  Tenant as TenantMessage,
  UpdateTenantRequest,
} from "../../gen/asor/v1/tenant_admin_service_pb.js";
import {
  CreateTenantRequestSchema,
  GetTenantRequestSchema,
  TenantSchema,
  TenantSettings_Discovery,
  TenantSettings_Signatures,
  TenantSettingsSchema,
  UpdateTenantRequestSchema,
} from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { issueAt, tenantNotFound } from "../domain/errors.js";
import {
  DEFAULT_TENANT_SETTINGS,
  DISCOVERY_POLICIES,
  SIGNATURE_POLICIES,
  type TenantSettings,
} from "../domain/tenant-admin.js";
import { assertValid, contractIssues, unknownFieldIssues } from "../domain/validation.js";
import type { AgentDefinitionRepository, Tenant } from "../storage/repository.js";

/** Tenant setup: the administrative operations, for the admin RPC and the admin command. */
export interface TenantService {
  create(request: CreateTenantRequest): Promise<TenantMessage>;
  list(): Promise<TenantMessage[]>;
  /** The tenant with its settings; `TENANT_NOT_FOUND`. */
  get(request: GetTenantRequest): Promise<TenantMessage>;
  /** Sets the settings the request names; answers the tenant with all its settings. */
  update(request: UpdateTenantRequest): Promise<TenantMessage>;
}

export function tenantMessage(tenant: Tenant, settings: TenantSettings = DEFAULT_TENANT_SETTINGS): TenantMessage {
  return create(TenantSchema, {
    name: tenant.name,
    ...(tenant.sequencePrefix === null ? {} : { sequencePrefix: tenant.sequencePrefix }),
    nextAgentNumber: tenant.nextAgentNumber,
    createTime: timestampFromDate(tenant.createdAt),
    settings: create(TenantSettingsSchema, {
      signatures: TenantSettings_Signatures[settings.signatures],
      discovery: TenantSettings_Discovery[settings.discovery],
    }),
  });
}

export function createTenantService(repository: AgentDefinitionRepository): TenantService {
  const admin = repository.tenantAdmin();
  const found = async (name: string): Promise<Tenant> => {
    const tenant = await repository.getTenant(name);
    if (tenant === undefined) throw tenantNotFound(name);
    return tenant;
  };
  return {
    async create(request) {
      assertValid([
        ...unknownFieldIssues(CreateTenantRequestSchema, request),
        ...contractIssues(CreateTenantRequestSchema, request),
      ]);
      return tenantMessage(await repository.createTenant(request.name, request.sequencePrefix ?? null));
    },
    async list() {
      const [tenants, settings] = await Promise.all([repository.listTenants(), admin.allSettings()]);
      return tenants.map((tenant) => tenantMessage(tenant, settings.get(tenant.name)));
    },
    async get(request) {
      assertValid([
        ...unknownFieldIssues(GetTenantRequestSchema, request),
        ...contractIssues(GetTenantRequestSchema, request),
      ]);
      const tenant = await found(request.name);
      return tenantMessage(tenant, await admin.settings(request.name));
    },
    async update(request) {
      const { signatures, discovery } = request.settings ?? {};
      const unspecified = (member: string, values: readonly string[]) =>
        issueAt(`settings.${member}`, "NOT_ALLOWED", `settings.${member} must be one of ${values.join(", ")}.`);
      assertValid([
        ...unknownFieldIssues(UpdateTenantRequestSchema, request),
        ...contractIssues(UpdateTenantRequestSchema, request),
        ...(signatures === TenantSettings_Signatures.SIGNATURES_UNSPECIFIED
          ? [unspecified("signatures", SIGNATURE_POLICIES)]
          : []),
        ...(discovery === TenantSettings_Discovery.DISCOVERY_UNSPECIFIED
          ? [unspecified("discovery", DISCOVERY_POLICIES)]
          : []),
      ]);
      const tenant = await found(request.name);
      const policy = SIGNATURE_POLICIES.find((p) => TenantSettings_Signatures[p] === signatures);
      const access = DISCOVERY_POLICIES.find((p) => TenantSettings_Discovery[p] === discovery);
      const change = {
        ...(policy === undefined ? {} : { signatures: policy }),
        ...(access === undefined ? {} : { discovery: access }),
      };
      return tenantMessage(tenant, await admin.updateSettings(request.name, change));
    },
  };
}
