import type { ConnectRouter } from "@connectrpc/connect";
import { AgentDefinitionService } from "../gen/asor/v1/agent_definition_service_pb.js";
import { TenantAdminService } from "../gen/asor/v1/tenant_admin_service_pb.js";
import { type Authenticator, createAuthenticator } from "./auth/authenticator.js";
import type { KeyStore } from "./auth/local-issuer.js";
import type { Config } from "./config.js";
import { createLogger, type Logger } from "./logger.js";
import { createRegistryService } from "./service/registry-service.js";
import { createTenantService } from "./service/tenant-service.js";
import { createKnexRepository } from "./storage/knex-repository.js";
import type { AgentDefinitionRepository } from "./storage/repository.js";
import { createRoutes } from "./transport/agent-definition-routes.js";
import { createAccessCheck, registryPolicy } from "./transport/auth-interceptor.js";
import { createRestHandler, notFoundResponse } from "./transport/rest/rest-handler.js";

/** The registry, wired and ready to be served by any runtime's adapter. */
export interface App {
  readonly config: Config;
  readonly logger: Logger;
  /** The Connect routes: gRPC, gRPC-Web and Connect. */
  readonly routes: (router: ConnectRouter) => void;
  /** The REST surface: a Response, or undefined for a path outside it. */
  readonly handleRest: (request: Request) => Promise<Response | undefined>;
  /** Every plain HTTP request (not gRPC, gRPC-Web or Connect): operational endpoints, then REST, else 404. */
  readonly handleHttp: (request: Request) => Promise<Response>;
  readonly repository: AgentDefinitionRepository;
  readonly authenticator: Authenticator;
  /** Releases the database pool. */
  close(): Promise<void>;
}

/** A plain HTTP endpoint at an exact path, outside the API (no authentication, no tenant). */
export interface HttpEndpoint {
  readonly path: string;
  handle(request: Request): Promise<Response>;
}

/** What the runtime provides: the local development issuer's key storage, a logger. */
export interface AppDeps {
  readonly logger?: Logger;
  /** Where the local development issuer keeps its key (used only without AUTH_ISSUER). */
  readonly keyStore?: KeyStore;
}

/** config -> authentication, storage -> service -> transports. */
export async function createApp(config: Config, deps: AppDeps = {}): Promise<App> {
  const logger = deps.logger ?? createLogger(config.logLevel);
  const authenticator = await createAuthenticator(config.auth, deps.keyStore === undefined ? {} : { keyStore: deps.keyStore });
  const repository = await createKnexRepository({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  const service = createRegistryService({ repository, host: config.hostSystem });
  const tenants = createTenantService(repository);
  const accessCheck = createAccessCheck(authenticator, registryPolicy(config.adminDomain));
  const registryRoutes = createRoutes({ service, tenants, defaultTenant: config.defaultTenant, logger, accessCheck });
  const handleRest = createRestHandler({ services: [AgentDefinitionService, TenantAdminService], routes: registryRoutes, logger, maxBodyBytes: config.maxBodyBytes, accessCheck });

  // Connect services beside the registry's own (reflection, health).
  const serviceRoutes: ((router: ConnectRouter) => void)[] = [];
  const routes = (router: ConnectRouter): void => {
    registryRoutes(router);
    for (const add of serviceRoutes) add(router);
  };

  // Plain HTTP endpoints outside the API (probes, metrics, the OpenAPI document), by exact path.
  const endpoints: HttpEndpoint[] = [];
  const handleHttp = async (request: Request): Promise<Response> => {
    const { pathname } = new URL(request.url);
    const endpoint = endpoints.find((e) => e.path === pathname);
    if (endpoint !== undefined) return endpoint.handle(request);
    return (await handleRest(request)) ?? notFoundResponse(pathname);
  };

  return { config, logger, authenticator, routes, handleRest, handleHttp, repository, close: () => repository.close() };
}
