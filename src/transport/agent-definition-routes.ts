import type { ConnectRouter, HandlerContext, Interceptor } from "@connectrpc/connect";
import { AgentDefinitionService } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { create } from "@bufbuild/protobuf";
import { ListAgentDefinitionsResponseSchema, ListAgentDefinitionVersionsResponseSchema } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ListTenantsResponseSchema, TenantAdminService } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import type { TenantService } from "../service/tenant-service.js";
import type { Logger } from "../logger.js";
import { type AccessCheck, authInterceptor, resolveTenant } from "./auth-interceptor.js";
import type { RegistryService } from "../service/registry-service.js";
import { asConnectError } from "./error-mapping.js";

export interface RoutesOptions {
  readonly service: RegistryService;
  readonly tenants: TenantService;
  /** The tenant of requests that name none (the contract's `/asor/v1` paths). */
  readonly defaultTenant: string;
  readonly logger: Logger;
  /** Authenticates every call and checks its security domains. */
  readonly accessCheck: AccessCheck;
}

/** Turns every error leaving a handler into the ConnectError a caller may see. */
function errorInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      throw asConnectError(err, logger, req.method.name);
    }
  };
}

/**
 * The one registration point of the registry's RPCs, taken by every adapter
 * (Node HTTP/1.1 and HTTP/2, Deno, and the REST transcoder's in-process
 * transport), so every surface runs the same interceptors and handlers.
 */
export function createRoutes({ service, tenants, defaultTenant, logger, accessCheck }: RoutesOptions) {
  const tenantOf = (requested: string, ctx: HandlerContext): string => resolveTenant(requested, ctx, defaultTenant);
  const options = {
    interceptors: [errorInterceptor(logger), authInterceptor(accessCheck)],
    // Reject unknown JSON keys instead of dropping them (Connect's default ignores them).
    jsonOptions: { ignoreUnknownFields: false },
  };
  return (router: ConnectRouter): void => {
    router.service(
      AgentDefinitionService,
      {
        async listAgentDefinitions(req, ctx) {
          const page = await service.list(tenantOf(req.tenant, ctx), req);
          return create(ListAgentDefinitionsResponseSchema, page);
        },
        getAgentDefinition: (req, ctx) => service.get(tenantOf(req.tenant, ctx), req),
        async listAgentDefinitionVersions(req, ctx) {
          const page = await service.listVersions(tenantOf(req.tenant, ctx), req);
          return create(ListAgentDefinitionVersionsResponseSchema, page);
        },
        async upsertAgentDefinition(req, ctx) {
          const { definition } = await service.upsert(tenantOf(req.tenant, ctx), req);
          return definition;
        },
      },
      options,
    );
    router.service(
      TenantAdminService,
      {
        createTenant: (req) => tenants.create(req),
        listTenants: async () => create(ListTenantsResponseSchema, { tenants: await tenants.list() }),
      },
      options,
    );
  };
}
