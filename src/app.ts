import type { DescMethod } from "@bufbuild/protobuf";
import { type ConnectRouter, createConnectRouter } from "@connectrpc/connect";
import type { Compression } from "@connectrpc/connect/protocol";
import { file_asor_v1_error } from "../gen/asor/v1/error_pb.js";
import { Health } from "../gen/grpc/health/v1/health_pb.js";
import openApiDocument from "../gen/openapi.json" with { type: "json" };
import { createWatching, openRepository } from "./app-storage.js";
import { type Authenticator, createAuthenticator } from "./auth/authenticator.js";
import { type KeyStore, LOCAL_ISSUER } from "./auth/local-issuer.js";
import { createTokenRechecks } from "./auth/token-rechecks.js";
import { type Catalog, type CatalogFiles, createCatalog, type SignInConfig } from "./catalog/catalog.js";
import type { Config } from "./config.js";
import type { CardKey, PublishedCardKeys } from "./domain/card-keys.js";
import type { HttpEndpoint } from "./http/http-endpoint.js";
import { createLogger, type Logger } from "./logger.js";
import { createMetrics, type Metrics } from "./observability/metrics.js";
import { createMetricsEndpoint } from "./observability/metrics-endpoint.js";
import { recordInterceptor, withInterceptors } from "./observability/record-interceptor.js";
import { createRequestTracker, type RequestTracker } from "./observability/request-tracker.js";
import type { Operations } from "./operations/operation.js";
import { createRegistryOperations, REGISTRY_SERVICES } from "./operations/registry-operations.js";
import type { WatchLimits } from "./operations/watch-limits.js";
import { createAppProber } from "./probe/app-prober.js";
import type { Prober } from "./probe/prober.js";
import { registryVersion } from "./probe/user-agent.js";
import { type CardSigner, createCardSigner, generatedCardKeys } from "./service/card-signer.js";
import { createProviderKeyService } from "./service/provider-key-service.js";
import { createRegistryService } from "./service/registry-service.js";
import { createTenantService } from "./service/tenant-service.js";
import { createWatchService } from "./service/watch-service.js";
import { createWriteBudget } from "./service/write-budget.js";
import type { ChangeReader } from "./storage/change-reader.js";
import type { AgentDefinitionRepository } from "./storage/repository.js";
import { type BodyBudget, createBodyBudget } from "./surfaces/body-budget.js";
import { createEdge, type Edge } from "./surfaces/edge.js";
import { JWKS_PATH } from "./surfaces/endpoints/jwks.js";
import { createProbeEndpoints } from "./surfaces/endpoints/probes.js";
import { refusalsOf } from "./surfaces/pipeline/failures.js";
import { createOpenApiEndpoint } from "./surfaces/rest/openapi/openapi-endpoint.js";
import { createRestSurface, type RestSurface } from "./surfaces/rest/surface.js";
import { createHealthRoutes } from "./surfaces/router/health.js";
import { createReflectionRoutes } from "./surfaces/router/reflection.js";
import { createRegistryImplementations, registryRoutes } from "./surfaces/router/routes.js";

/** The registry, wired and ready to be served by any runtime's adapter. */
export interface App {
  readonly config: Config;
  readonly logger: Logger;
  /** Every request of every surface, once its runtime's adapter has read it. */
  readonly edge: Edge;
  /**
   * The request paths of the registry's RPCs whose binary gRPC calls the edge serves itself (every unary RPC,
   * and the watch: src/surfaces/grpc/): a runtime's adapter may hand them to the edge straight from their
   * HTTP/2 stream.
   */
  readonly grpcPaths: ReadonlySet<string>;
  /** The operations every surface runs, by method (for in-process use: tests, tools). */
  readonly operations: Operations;
  /** The access log and request metrics: a runtime's adapter starts a record per request and finishes it once. */
  readonly requests: RequestTracker;
  readonly repository: AgentDefinitionRepository;
  /** The change reader of the watches: closing it ends every watch cleanly (graceful shutdown does first). */
  readonly changes: ChangeReader;
  readonly authenticator: Authenticator;
  /**
   * The request body bytes all requests hold at once (MAX_BUFFERED_BODY_BYTES); a runtime's adapter reads
   * every body through it.
   */
  readonly bodyBudget: BodyBudget;
  /**
   * The watches open (WATCH_MAX_*): a runtime's adapter may refuse a watch its operation would refuse before
   * reading it whole (refuseEarly: src/node/early-watch-refusal.ts).
   */
  readonly watches: WatchLimits;
  /** Whether a GET of `pathname` is a REST watch (a binding of the watch RPC). */
  isWatchPath(pathname: string): boolean;
  /** The service's metrics, for what a runtime's adapter counts itself (connections refused). */
  readonly metrics: Metrics;
  /** `GET /metrics`: on the API port, or (METRICS_PORT) served by the entrypoint on a port of its own. */
  readonly metricsEndpoint: HttpEndpoint;
  /**
   * Whether the edge has something at `pathname` (an RPC, a plain endpoint, a REST binding, whatever its verb
   * takes): any other path it answers 404. An embedding (the express middleware) hands those to its host's
   * other routes instead.
   */
  serves(pathname: string): boolean;
  /** Logs the refusals counted since the last summary line, and releases the database pool. */
  close(): Promise<void>;
}

/** What the runtime provides. */
export interface AppDeps {
  readonly logger?: Logger;
  /** Where the local development issuer keeps its key (used only without AUTH_ISSUER). */
  readonly keyStore?: KeyStore;
  /** The compressions the RPCs accept, where the runtime has them (connect-node's gzip and brotli on Node). */
  readonly acceptCompression?: readonly Compression[];
  /** Wraps the authenticator made from the config (tests count its calls). */
  readonly wrapAuthenticator?: (authenticator: Authenticator) => Authenticator;
  /**
   * The catalog's built files (dist/ui/, read by the entrypoint: src/main/catalog-files.ts); undefined: `/ui/`
   * answers that the catalog is not built.
   */
  readonly catalogFiles?: CatalogFiles;
  /**
   * The card signing keys (the entrypoint's: src/main/card-signing-key-files.ts); absent: a key made in memory
   * for this process.
   */
  readonly cardKeys?: () => Promise<readonly CardKey[]>;
}

/**
 * RPC answers smaller than this go uncompressed, whatever the client accepts:
 * gzip of one 2.3 KB definition cost more CPU than the bytes it saved (11 % of
 * the server's CPU on Connect GET by id in the profile, BENCHMARKS.md). Pages
 * of many definitions still compress.
 */
const COMPRESS_MIN_BYTES = 64 * 1024;

/** config -> authentication, storage -> service -> operations -> the edge. */
export async function createApp(config: Config, deps: AppDeps = {}): Promise<App> {
  const logger = deps.logger ?? createLogger(config.logLevel);
  const made = await createAuthenticator(config.auth, deps.keyStore === undefined ? {} : { keyStore: deps.keyStore });
  const authenticator = deps.wrapAuthenticator?.(made) ?? made;
  const repository = await openRepository(config, logger);
  const { watchReplay, changes, watchLimits } = createWatching(config, repository, logger);
  const cardSigner = await createCardSigner(await (deps.cardKeys ?? generatedCardKeys)(), {
    overlapMs: config.cardSigning.overlapSeconds * 1000,
  });
  // The prober reports to the metrics, made after it: each probe is counted once they exist.
  let probed: Metrics["probed"] | undefined;
  const prober = createAppProber(config, repository, logger, (outcome, seconds) => probed?.(outcome, seconds));
  const operations = createAppOperations(config, { repository, changes, watchLimits, cardSigner, prober });
  const bodyBudget = createBodyBudget(config.maxBufferedBodyBytes);
  const metrics = createAppMetrics(repository, { bodyBudget, watchReplay, watchLimits, probing: prober !== undefined });
  probed = (outcome, seconds) => metrics.probed(outcome, seconds);
  const metricsEndpoint = createMetricsEndpoint(metrics);
  const requests = createRequestTracker({ logger, metrics });
  const ping = () => repository.ping();
  const routes = createAppRoutes(config, operations, logger, ping);
  const acceptCompression = [...(deps.acceptCompression ?? [])];

  const rest = createRestSurface({ operations, maxBodyBytes: config.maxBodyBytes, logger });
  // With a METRICS_PORT of its own, /metrics is off the API port: the entrypoint serves it there.
  const endpoints = [
    ...createProbeEndpoints(ping),
    ...(config.metricsPort === undefined ? [metricsEndpoint] : []),
    createOpenApiEndpoint(openApiDocument),
  ];
  const unary = methodsByPath("unary");
  const streams = methodsByPath("server_streaming");
  const catalog = await createAppCatalog(config, made, deps.catalogFiles);
  const edge = createAppEdge(config, {
    authenticator,
    operations,
    routes,
    acceptCompression,
    unary,
    streams,
    rest,
    endpoints,
    logger,
    catalog,
    cardKeys: cardSigner.published,
  });
  const serves = servesOf(routes, endpoints, catalog, rest);

  const close = async (): Promise<void> => {
    // The refusals counted since the last summary line are told before the process goes.
    refusalsOf(logger).flush();
    await prober?.close();
    await changes.close();
    await repository.close();
  };
  return {
    config,
    logger,
    edge,
    grpcPaths: new Set([...unary.keys(), ...streams.keys()]),
    operations,
    authenticator,
    requests,
    repository,
    changes,
    bodyBudget,
    watches: watchLimits,
    isWatchPath: (pathname) => rest.match("GET", pathname)?.route?.method.methodKind === "server_streaming",
    metrics,
    metricsEndpoint,
    serves,
    close,
  };
}

/** The process's metrics, from its storage, budgets and watches (and the prober's states when it runs). */
function createAppMetrics(
  repository: AgentDefinitionRepository,
  parts: {
    bodyBudget: BodyBudget;
    watchReplay: ReturnType<typeof createWatching>["watchReplay"];
    watchLimits: WatchLimits;
    probing: boolean;
  },
): Metrics {
  return createMetrics({
    poolStats: () => repository.poolStats(),
    writeRetries: () => repository.writeRetries(),
    keyedReads: () => repository.keyedReads(),
    bodyBudget: parts.bodyBudget,
    watchReplay: parts.watchReplay,
    watches: parts.watchLimits,
    ...(parts.probing ? { livenessStates: () => repository.probeSchedule().states() } : {}),
  });
}

/** The services over the storage, and the operations over them. */
function createAppOperations(
  config: Config,
  parts: {
    repository: AgentDefinitionRepository;
    changes: ChangeReader;
    watchLimits: WatchLimits;
    cardSigner: CardSigner;
    prober: Prober | undefined;
  },
): Operations {
  const { repository, changes, watchLimits, cardSigner, prober } = parts;
  return createRegistryOperations({
    service: createRegistryService({
      repository,
      host: config.hostSystem,
      maxTermsPerDefinition: config.maxTermsPerDefinition,
      writeBudget: createWriteBudget(config.maxBufferedWriteBytes),
      cardSigner,
    }),
    tenants: createTenantService(repository),
    providerKeys: createProviderKeyService(repository),
    watch: createWatchService(repository, changes),
    watchLimits,
    ...(prober === undefined ? {} : { probe: (tenant: string, id: string) => prober.probeNow(tenant, id) }),
    defaultTenant: config.defaultTenant,
    adminDomain: config.adminDomain,
    claims: config.auth,
    discovery: async (tenant) => (await repository.tenantAdmin().settings(tenant)).discovery,
  });
}

/** The Connect router's routes: the registry's RPCs, health and reflection, each noted on its request's record. */
function createAppRoutes(config: Config, operations: Operations, logger: Logger, ping: () => Promise<void>) {
  // Every RPC notes its procedure and outcome on the request's record (the access log line).
  // Health and reflection carry no registry data: the edge asks no token for them. error.proto
  // is described too, so clients can decode error details.
  const implementations = createRegistryImplementations({ operations, logger });
  return withInterceptors(
    (router: ConnectRouter) => {
      registryRoutes(implementations)(router);
      createHealthRoutes({
        services: REGISTRY_SERVICES,
        ping,
        maxWatches: config.healthMaxWatches,
        maxWatchesPerConnection: config.healthMaxWatchesPerConnection,
      })(router);
      createReflectionRoutes({ services: [...REGISTRY_SERVICES, Health], files: [file_asor_v1_error] })(router);
    },
    [recordInterceptor()],
  );
}

/** The parts of the app the edge serves. */
interface EdgeParts {
  readonly authenticator: Authenticator;
  readonly operations: Operations;
  readonly routes: (router: ConnectRouter) => void;
  readonly acceptCompression: Compression[];
  readonly unary: Map<string, DescMethod>;
  readonly streams: Map<string, DescMethod>;
  readonly rest: RestSurface;
  readonly endpoints: HttpEndpoint[];
  readonly logger: Logger;
  readonly catalog: Catalog;
  readonly cardKeys: PublishedCardKeys;
}

/** The edge: every request of every surface, with its token rechecks for the watches. */
function createAppEdge(config: Config, parts: EdgeParts): Edge {
  const { authenticator, operations, routes, acceptCompression, unary, streams, rest, endpoints, logger } = parts;
  return createEdge({
    authenticator,
    // Every watch of every surface follows its token here (issue 50, item 4).
    rechecks: createTokenRechecks({
      authenticator,
      intervalMs: config.watch.tokenRecheckMs,
      onUnavailable: (error) =>
        logger.warn("a watch's token could not be checked again; it is tried again later", { error: String(error) }),
    }),
    operations,
    routes,
    routerOptions: {
      readMaxBytes: config.maxBodyBytes,
      acceptCompression,
      compressMinBytes: COMPRESS_MIN_BYTES,
    },
    // Binary gRPC calls and Connect unary POSTs of the registry's RPCs are served by the edge's pipeline.
    unary,
    streams,
    rpcOptions: { logger, acceptCompression, compressMinBytes: COMPRESS_MIN_BYTES },
    rest,
    endpoints,
    maxBodyBytes: config.maxBodyBytes,
    logger,
    catalog: parts.catalog,
    cardKeys: parts.cardKeys,
    publicUrl: config.publicUrl,
    mcp: {
      issuer: config.auth.issuer?.href ?? authenticator.localIssuer?.issuer ?? LOCAL_ISSUER,
      version: registryVersion(),
    },
  });
}

/**
 * Whether the edge has something at a path, from the same routes and endpoints it was given: the RPCs' paths are
 * read off a router that only lists them (it never serves a request).
 */
function servesOf(
  routes: (router: ConnectRouter) => void,
  endpoints: readonly HttpEndpoint[],
  catalog: Catalog,
  rest: RestSurface,
): (pathname: string) => boolean {
  const listing = createConnectRouter();
  routes(listing);
  const paths = new Set([...listing.handlers.map((h) => h.requestPath), ...endpoints.map((e) => e.path), JWKS_PATH]);
  return (pathname: string): boolean =>
    paths.has(pathname) || catalog.serves(pathname) || rest.match("GET", pathname) !== undefined;
}

/** The registry's RPCs of one kind by request path (`/<service>/<method>`). */
function methodsByPath(kind: DescMethod["methodKind"]): Map<string, DescMethod> {
  return new Map(
    REGISTRY_SERVICES.flatMap((service) =>
      service.methods
        .filter((method) => method.methodKind === kind)
        .map((method) => [`/${service.typeName}/${method.name}`, method] as const),
    ),
  );
}

/** The lifetime of the catalog's development sign-in tokens: an hour, or less when tokens may not live so long. */
const CATALOG_DEV_TOKEN_SECONDS = 3600;

/** The catalog, signing in with the local development issuer (when it is on) or the configured OpenID issuer. */
function createAppCatalog(config: Config, authenticator: Authenticator, files: CatalogFiles | undefined) {
  const local = authenticator.localIssuer;
  const { issuer } = config.auth;
  let signIn: SignInConfig;
  if (issuer === undefined) signIn = { kind: "local" };
  else if (config.ui.oidcClientId === undefined)
    signIn = { kind: "none", reason: "The registry has no UI_OIDC_CLIENT_ID: the catalog cannot sign anyone in." };
  else
    signIn = {
      kind: "oidc",
      issuer: issuer.href,
      clientId: config.ui.oidcClientId,
      scope: config.ui.oidcScope,
      ...(config.ui.oidcResource === undefined ? {} : { resource: config.ui.oidcResource }),
      allowHttp: config.auth.allowHttpIssuer,
    };
  const catalog: Promise<Catalog> = createCatalog(files, {
    signIn,
    localIssuer:
      issuer !== undefined || local === undefined
        ? undefined
        : ({ tenant, domains, ttlSeconds }) => local.issue({ subject: "catalog", tenant, domains, ttlSeconds }),
    ttlSeconds: Math.min(CATALOG_DEV_TOKEN_SECONDS, config.auth.maxTokenLifetimeSeconds),
  });
  return catalog;
}
