import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { openLocalIssuer } from "../../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import type { FreshDatabase } from "./databases.js";
import { ALL_DOMAINS } from "./server.js";
import { type Runtime, type ServerProcess, spawnServer } from "./server-process.js";

/** A registry in its own process, and a token it accepts. */
export interface AuthorizedProcess extends ServerProcess {
  /** `Bearer <token>` for the tenant `default` with every domain. */
  readonly authorization: string;
  /** True while the process runs: it has not crashed. */
  alive(): boolean;
}

/**
 * Starts the service as a child process (under `runtime`) on `database` with `env`, so a
 * test can tell a crash (the process gone) from an error answer.
 */
export async function spawnAuthorizedServer(
  database: FreshDatabase,
  env: Record<string, string> = {},
  runtime: Runtime = "node",
): Promise<AuthorizedProcess> {
  const server = await spawnServer(
    {
      DATA_DIR: database.dataDir,
      ...(database.databaseUrl ? { DATABASE_URL: database.databaseUrl } : {}),
      ...env,
    },
    runtime,
  );
  // The process made its local issuer key in DATA_DIR on start; tokens signed with it are accepted.
  const issuer = await openLocalIssuer(localIssuerKeyFile(database.dataDir), parseAuthConfig({}).config);
  const authorization = `Bearer ${await issuer.issue({ tenant: "default", domains: ALL_DOMAINS })}`;
  return { ...server, authorization, alive: () => server.child.exitCode === null && server.child.signalCode === null };
}
