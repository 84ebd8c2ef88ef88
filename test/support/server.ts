import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import { afterAll, beforeAll } from "vitest";
import { type App, type AppDeps, createApp } from "../../src/app.js";
import { openLocalIssuer } from "../../src/auth/local-issuer.js";
import { type Config, parseConfig } from "../../src/config.js";
import { createLogger, type Logger } from "../../src/logger.js";
import { cardSigningKeyFiles } from "../../src/main/card-signing-key-files.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import { createNodeServer, listen } from "../../src/node/node-server.js";
import type { FreshDatabase, TestDatabase } from "./databases.js";

/** Every security domain the service knows: the spec's two and the admin domain. */
export const ALL_DOMAINS = ["Development", "Setup: Agents", "Setup: Tenants"];

/** A registry listening on a real port, on a fresh database. */
export interface TestServer {
  readonly app: App;
  readonly port: number;
  /** http://127.0.0.1:<port> */
  readonly baseUrl: string;
  /**
   * `Bearer <token>` for the tenant `default` with every domain and the
   * platform admin claim (so the tenant admin RPCs admit it too).
   */
  readonly authorization: string;
  /**
   * `Bearer <token>` from the server's local development issuer; `tenant: null`
   * leaves the tenant claim out; `platformAdmin` sets the platform admin claim.
   */
  bearer(claims?: {
    tenant?: string | null;
    domains?: readonly string[];
    ttlSeconds?: number;
    platformAdmin?: boolean;
    /** `sub`; default the issuer's (`developer`). */
    subject?: string;
  }): Promise<string>;
}

/**
 * Starts a server on port 0 against `database` (logging to `logger`, else nowhere); stop it with the returned
 * function.
 */
export async function startServer(
  database: FreshDatabase,
  env: Record<string, string> = {},
  logger?: Logger,
  deps: Pick<AppDeps, "wrapAuthenticator"> = {},
): Promise<TestServer & { stop(): Promise<void> }> {
  const config = testConfig(database, env);
  const keyStore = localIssuerKeyFile(config.dataDir);
  const app = await createApp(config, {
    logger: logger ?? testLogger(),
    keyStore,
    cardKeys: cardSigningKeyFiles(config),
    acceptCompression: [compressionGzip, compressionBrotli],
    ...deps,
  });
  const node = createNodeServer(app);
  const port = await listen(node.server, 0, "127.0.0.1");
  const bearer = await localBearer(config);
  return {
    app,
    port,
    baseUrl: `http://127.0.0.1:${port}`,
    authorization: await bearer({ platformAdmin: true }),
    bearer,
    async stop() {
      await node.close();
      await app.close();
    },
  };
}

/**
 * The config of a test registry on `database` (any port), with `env` on top. The prober is off unless a test
 * turns it on (PROBE_ENABLED=true): the fixtures' agent URLs (agents.example.com) are no agents to probe.
 */
export function testConfig(database: FreshDatabase, env: Record<string, string> = {}): Config {
  return parseConfig({
    PORT: "0",
    PROBE_ENABLED: "false",
    DATA_DIR: database.dataDir,
    ...(database.databaseUrl ? { DATABASE_URL: database.databaseUrl } : {}),
    ...env,
  });
}

/** The tests' logger: silent, unless TEST_LOG_LEVEL=debug. */
export function testLogger(): Logger {
  return createLogger(process.env.TEST_LOG_LEVEL === "debug" ? "info" : "silent");
}

/** TestServer.bearer for a registry of `config` whose app has started (its local issuer's key is in DATA_DIR). */
export async function localBearer(config: Config): Promise<TestServer["bearer"]> {
  const issuer = await openLocalIssuer(localIssuerKeyFile(config.dataDir), config.auth);
  return async ({ tenant = "default", domains = ALL_DOMAINS, ttlSeconds, platformAdmin = false, subject } = {}) => {
    const claims = { domains, platformAdmin, ...(tenant === null ? {} : { tenant }), ...(subject ? { subject } : {}) };
    return `Bearer ${await issuer.issue({ ...claims, ...(ttlSeconds === undefined ? {} : { ttlSeconds }) })}`;
  };
}

/** A server for the enclosing suite: a fresh database and a server, both gone after it. */
export function useServer(db: TestDatabase, env: Record<string, string> = {}): () => TestServer {
  let database: FreshDatabase | undefined;
  let server: (TestServer & { stop(): Promise<void> }) | undefined;
  beforeAll(async () => {
    database = await db.create();
    server = await startServer(database, env);
  });
  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
  });
  return () => {
    if (server === undefined) throw new Error("The server is only available inside tests of its suite.");
    return server;
  };
}
