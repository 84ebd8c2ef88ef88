import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { openLocalIssuer } from "../../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import { minimalDefinition } from "./definitions.js";
import type { GaleraDatabase } from "./galera.js";
import { ALL_DOMAINS } from "./server.js";
import { type ServerProcess, spawnServer } from "./server-process.js";

/** Registry processes on one cluster database, one per DATABASE_URL, and a token every one accepts. */
export interface Replicas {
  readonly servers: readonly ServerProcess[];
  /** `Bearer <token>` for the tenant `default` with every domain. */
  readonly authorization: string;
  /** POSTs a new definition named `name` through replica i; its status and body. */
  post(i: number, name: string): Promise<{ status: number; body: any }>;
  stop(): Promise<void>;
}

/**
 * Starts one registry per URL of `urls` on `db` (one DATA_DIR, so one local issuer key). The first
 * starts alone and migrates the fresh database; the others start after it.
 */
export async function startReplicas(
  db: GaleraDatabase,
  urls: readonly string[],
  env: Record<string, string> = {},
): Promise<Replicas> {
  const spawn = (url: string) => spawnServer({ DATA_DIR: db.dataDir, DATABASE_URL: url, ...env });
  const first = await spawn(urls[0]!);
  const servers = [first, ...(await Promise.all(urls.slice(1).map(spawn)))];
  const issuer = await openLocalIssuer(localIssuerKeyFile(db.dataDir), parseAuthConfig({}).config);
  const authorization = `Bearer ${await issuer.issue({ tenant: "default", domains: ALL_DOMAINS })}`;
  return {
    servers,
    authorization,
    post: async (i, name) => {
      const res = await fetch(`${servers[i]!.baseUrl}/api/asor/v1/default/agentDefinition`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization },
        body: JSON.stringify(minimalDefinition({ name })),
      });
      return { status: res.status, body: await res.json() };
    },
    stop: async () => {
      await Promise.all(servers.map((s) => s.stop()));
    },
  };
}

/** The default tenant's agents through node n, read once node n has applied every commit it has seen. */
export async function agentNumbers(db: GaleraDatabase, n: number): Promise<number[]> {
  const rows = await db.query<Array<{ number: number | string }>>(
    n,
    "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT number FROM agents WHERE tenant = 'default' ORDER BY number",
  );
  return rows.map((row) => Number(row.number));
}
