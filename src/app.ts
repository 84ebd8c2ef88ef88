import type { ConnectRouter, ContextValues } from "@connectrpc/connect";
import { AgentDefinitionService } from "../gen/asor/v1/agent_definition_service_pb.js";
import { file_asor_v1_error } from "../gen/asor/v1/error_pb.js";
import { TenantAdminService } from "../gen/asor/v1/tenant_admin_service_pb.js";
import { Health } from "../gen/grpc/health/v1/health_pb.js";
import openApiDocument from "../gen/openapi.json" with { type: "json" };
import { type Authenticator, createAuthenticator } from "./auth/authenticator.js";
import type { KeyStore } from "./auth/local-issuer.js";
import type { Config } from "./config.js";
import { createLogger, type Logger } from "./logger.js";
import { createMetrics } from "./observability/metrics.js";
import { createMetricsEndpoint } from "./observability/metrics-endpoint.js";
import { recordInterceptor, withInterceptors } from "./observability/record-interceptor.js";
import { recordOf } from "./observability/request-record.js";
import { createRequestTracker, type RequestTracker } from "./observability/request-tracker.js";
import { createRegistryService } from "./service/registry-service.js";
import { createTenantService } from "./service/tenant-service.js";
import { createKnexRepository } from "./storage/knex-repository.js";
import type { AgentDefinitionRepository } from "./storage/repository.js";
import { createRoutes } from "./transport/agent-definition-routes.js";
import { createAccessCheck, registryPolicy } from "./transport/auth-interceptor.js";
import { createHealthRoutes } from "./transport/health.js";
import { withMessageGuard } from "./transport/message-guard.js";
import { createOpenApiEndpoint } from "./transport/openapi/openapi-endpoint.js";
import { createProbeEndpoints } from "./transport/probes.js";
import { createReflectionRoutes } from "./transport/reflection.js";
import { createRestHandler, notFoundResponse } from "./transport/rest/rest-handler.js";

/** The registry, wired and ready to be served by any runtime's adapter. */
export interface App {
  readonly config: Config;
  readonly logger: Logger;
  /** The Connect routes: gRPC, gRPC-Web and Connect. */
  readonly routes: (router: ConnectRouter) => void;
  /**
   * Every plain HTTP request (not gRPC, gRPC-Web or Connect): operational
   * endpoints, then REST, else 404. `values` are the request's context values
   * (its record), handed on to the RPC a REST request calls.
   */
  readonly handleHttp: (request: Request, values?: ContextValues) => Promise<Response>;
  /** The access log and request metrics: a runtime's edge starts a record per request and finishes it once. */
  readonly requests: RequestTracker;
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
  const repository = await createKnexRepository({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, timeoutMillis: config.databaseTimeoutMs });
  const service = createRegistryService({ repository, host: config.hostSystem });
  const tenants = createTenantService(repository);
  const accessCheck = createAccessCheck(authenticator, registryPolicy(config.adminDomain));
  const metrics = createMetrics({ poolStats: () => repository.poolStats() });
  const requests = createRequestTracker({ logger, metrics });
  const ping = () => repository.ping();
  const registryServices = [AgentDefinitionService, TenantAdminService];

  // Every RPC notes its procedure and outcome on the request's record (the access log line).
  const recorded = [recordInterceptor()];
  const registryRoutes = withInterceptors(createRoutes({ service, tenants, defaultTenant: config.defaultTenant, logger, accessCheck }), recorded);
  const handleRest = createRestHandler({ services: registryServices, routes: registryRoutes, logger, maxBodyBytes: config.maxBodyBytes, accessCheck });

  // Health and reflection carry no registry data: no authentication. error.proto is
  // described too, so clients can decode error details.
  const toolRoutes = withInterceptors((router: ConnectRouter) => {
    createHealthRoutes({ services: registryServices, ping })(router);
    createReflectionRoutes({ services: [...registryServices, Health], files: [file_asor_v1_error] })(router);
  }, recorded);
  // Every RPC message is checked before Connect decodes it (see message-guard.ts).
  const routes = withMessageGuard(
    (router: ConnectRouter) => {
      registryRoutes(router);
      toolRoutes(router);
    },
    { maxBodyBytes: config.maxBodyBytes },
  );

  // Plain HTTP endpoints outside the API, by exact path.
  const endpoints: HttpEndpoint[] = [...createProbeEndpoints(ping), createMetricsEndpoint(metrics), createOpenApiEndpoint(openApiDocument)];
  const handleHttp = async (request: Request, values?: ContextValues): Promise<Response> => {
    const { pathname } = new URL(request.url);
    const endpoint = endpoints.find((e) => e.path === pathname);
    const record = recordOf(values);
    if (record !== undefined) {
      // Plain HTTP unless the REST handler recognizes one of its paths.
      record.protocol = "http";
      record.endpoint = endpoint?.path;
    }
    if (endpoint !== undefined) return endpoint.handle(request);
    return (await handleRest(request, values)) ?? notFoundResponse(pathname);
  };

  return { config, logger, authenticator, routes, handleHttp, requests, repository, close: () => repository.close() };
}
