import type { ConnectRouter } from "@connectrpc/connect";
import { AgentDefinitionService } from "../gen/asor/v1/agent_definition_service_pb.js";
import type { Config } from "./config.js";
import { createLogger, type Logger } from "./logger.js";
import { createRegistryService } from "./service/registry-service.js";
import { createKnexRepository } from "./storage/knex-repository.js";
import type { AgentDefinitionRepository } from "./storage/repository.js";
import { createRoutes } from "./transport/agent-definition-routes.js";
import { createRestHandler } from "./transport/rest/rest-handler.js";

/** The registry, wired and ready to be served by any runtime's adapter. */
export interface App {
  readonly config: Config;
  readonly logger: Logger;
  /** The Connect routes: gRPC, gRPC-Web and Connect. */
  readonly routes: (router: ConnectRouter) => void;
  /** The REST surface: a Response, or undefined for a path outside it. */
  readonly handleRest: (request: Request) => Promise<Response | undefined>;
  readonly repository: AgentDefinitionRepository;
  /** Releases the database pool. */
  close(): Promise<void>;
}

/** config -> storage -> service -> transports. */
export async function createApp(config: Config, logger: Logger = createLogger(config.logLevel)): Promise<App> {
  const repository = await createKnexRepository({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  const service = createRegistryService({ repository });
  const routes = createRoutes({ service, defaultTenant: config.defaultTenant, logger });
  const handleRest = createRestHandler({ services: [AgentDefinitionService], routes, logger, maxBodyBytes: config.maxBodyBytes });
  return { config, logger, routes, handleRest, repository, close: () => repository.close() };
}
