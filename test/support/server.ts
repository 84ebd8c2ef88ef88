import { afterAll, beforeAll } from "vitest";
import { type App, createApp } from "../../src/app.js";
import { parseConfig } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { createNodeServer, listen } from "../../src/main/node-server.js";
import type { FreshDatabase, TestDatabase } from "./databases.js";

/** A registry listening on a real port, on a fresh database. */
export interface TestServer {
  readonly app: App;
  readonly port: number;
  /** http://127.0.0.1:<port> */
  readonly baseUrl: string;
}

/** Starts a server on port 0 against `database`; stop it with the returned function. */
export async function startServer(database: FreshDatabase, env: Record<string, string> = {}): Promise<TestServer & { stop(): Promise<void> }> {
  const config = parseConfig({
    PORT: "0",
    DATA_DIR: database.dataDir,
    ...(database.databaseUrl ? { DATABASE_URL: database.databaseUrl } : {}),
    ...env,
  });
  const app = await createApp(config, createLogger(process.env.TEST_LOG_LEVEL === "debug" ? "info" : "silent"));
  const node = createNodeServer(app);
  const port = await listen(node.server, 0, "127.0.0.1");
  return {
    app,
    port,
    baseUrl: `http://127.0.0.1:${port}`,
    async stop() {
      await node.close();
      await app.close();
    },
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
