/**
 * The process-level suites under both runtimes: each database under Node
 * and under Deno, so the same tests show that `npm start` and
 * `npm run start:deno` serve alike.
 *
 *   forEachRuntimeAndDatabase((db, runtime) => {
 *     const server = useServerUnder(runtime, db);
 *     it("...", async () => { await fetch(server().baseUrl ...) });
 *   });
 *
 * Under Node the server runs in the test's own process (startServer: the
 * entrypoint's wiring, without a process to start); under Deno it is a
 * `npm run start:deno` process.
 */
import { afterAll, beforeAll, describe } from "vitest";
import { openLocalIssuer } from "../../src/auth/local-issuer.js";
import { parseConfig } from "../../src/config.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import { type FreshDatabase, type TestDatabase, testDatabases } from "./databases.js";
import { ALL_DOMAINS, type TestServer, useServer } from "./server.js";
import { RUNTIMES, type Runtime, type ServerProcess, spawnServer } from "./server-process.js";

/** A running registry, in this process or another: what a test reaches it by. */
export type ReachableServer = Omit<TestServer, "app">;

/** Each database of this run under each runtime, as `[db, runtime]`, skipped databases included (check `db.skip`). */
export function runtimesAndDatabases(): [TestDatabase, Runtime][] {
  return RUNTIMES.flatMap((runtime) => testDatabases().map((db): [TestDatabase, Runtime] => [db, runtime]));
}

/** Declares `describe("on <db> under <runtime>")` for each pair, skipping the databases this run lacks. */
export function forEachRuntimeAndDatabase(body: (db: TestDatabase, runtime: Runtime) => void): void {
  for (const [db, runtime] of runtimesAndDatabases()) {
    describe.skipIf(db.skip)(`on ${db.name} under ${runtime}`, () => body(db, runtime));
  }
}

/** A server for the enclosing suite on a fresh database, under `runtime`; gone after the suite. */
export function useServerUnder(
  runtime: Runtime,
  db: TestDatabase,
  env: Record<string, string> = {},
): () => ReachableServer {
  if (runtime === "node") return useServer(db, env);
  let database: FreshDatabase | undefined;
  let server: (ReachableServer & { stop(): Promise<unknown> }) | undefined;
  beforeAll(async () => {
    database = await db.create();
    server = await startServerProcess(database, env, runtime);
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
  });
  return () => {
    if (server === undefined) throw new Error("The server is only available inside tests of its suite.");
    return server;
  };
}

/**
 * Starts the service as a process under `runtime` on `database`, with tokens from the local issuer it made in
 * DATA_DIR.
 */
export async function startServerProcess(
  database: FreshDatabase,
  env: Record<string, string>,
  runtime: Runtime,
  nodeFlags: readonly string[] = [],
): Promise<ReachableServer & ServerProcess> {
  const processEnv = {
    DATA_DIR: database.dataDir,
    ...(database.databaseUrl ? { DATABASE_URL: database.databaseUrl } : {}),
    ...env,
  };
  const server = await spawnServer(processEnv, runtime, nodeFlags);
  // The process made its local issuer key in DATA_DIR on start; tokens signed with it are accepted.
  const issuer = await openLocalIssuer(localIssuerKeyFile(database.dataDir), parseConfig(processEnv).auth);
  const bearer: TestServer["bearer"] = async ({
    tenant = "default",
    domains = ALL_DOMAINS,
    ttlSeconds,
    platformAdmin = false,
    subject,
  } = {}) => {
    const claims = { domains, platformAdmin, ...(tenant === null ? {} : { tenant }), ...(subject ? { subject } : {}) };
    return `Bearer ${await issuer.issue({ ...claims, ...(ttlSeconds === undefined ? {} : { ttlSeconds }) })}`;
  };
  return { ...server, authorization: await bearer({ platformAdmin: true }), bearer };
}
