import { afterAll, beforeAll, expect } from "vitest";
import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { openLocalIssuer } from "../../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import { minimalDefinition } from "./definitions.js";
import { type GaleraDatabase, NODES, nodeStatus } from "./galera.js";
import { ALL_DOMAINS } from "./server.js";
import { type ServerProcess, spawnServer } from "./server-process.js";
import type { WriteOutcome } from "./write-burst.js";

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

/**
 * Replicas for the enclosing suite: started before it on `db()`, one per URL of `urls(db())` (with `env(db())`),
 * stopped after it; the returned function gives them to the tests.
 */
export function useReplicas(
  db: () => GaleraDatabase,
  urls: (db: GaleraDatabase) => readonly string[],
  env: (db: GaleraDatabase) => Record<string, string> = () => ({}),
): () => Replicas {
  let replicas: Replicas | undefined;
  beforeAll(async () => {
    replicas = await startReplicas(db(), urls(db()), env(db()));
  }, 120_000);
  afterAll(async () => {
    await replicas?.stop();
  });
  return () => {
    if (replicas === undefined) throw new Error("The replicas did not start (see beforeAll's error).");
    return replicas;
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

/** DATABASE_URL of `db` with every node, node `first` first and the others after it in turn. */
export function allNodesFrom(db: GaleraDatabase, first: number): string {
  const order = NODES.map((_, i) => NODES[(NODES.indexOf(first) + i) % NODES.length]!);
  const hosts = order.map((n) => new URL(db.url(n)).host);
  return db.url(first).replace(new URL(db.url(first)).host, hosts.join(","));
}

/** The replica's `asor_db_write_retries_total` by cause, from its /metrics. */
export async function writeRetries(server: ServerProcess): Promise<Record<string, number>> {
  const text = await (await fetch(`${server.baseUrl}/metrics`)).text();
  const retries: Record<string, number> = {};
  for (const [, cause, value] of text.matchAll(/^asor_db_write_retries_total\{cause="(\w+)"\} (\d+)$/gm))
    retries[cause!] = Number(value);
  return retries;
}

/** Node n's counters of `names` (SHOW GLOBAL STATUS), e.g. wsrep_local_commits, wsrep_local_cert_failures. */
export async function nodeCounters(n: number, names: readonly string[]): Promise<Record<string, number>> {
  const status = (await nodeStatus(n)) ?? {};
  return Object.fromEntries(names.map((name) => [name, Number(status[name] ?? Number.NaN)]));
}

/**
 * Every node holds every acknowledged write of `outcomes` (named `prefix`...) and none that was refused (those whose
 * outcome is unknown may be either), and all hold the same. Logs the counts and the statuses.
 */
export async function expectAgreement(
  db: GaleraDatabase,
  outcomes: readonly WriteOutcome[],
  prefix: string,
): Promise<void> {
  const created = outcomes.filter((o) => o.status === 201);
  const acknowledged = new Set(created.map((o) => o.name));
  const inDoubt = new Set(
    outcomes.filter((o) => o.status === "dropped" || o.body?.code === "OUTCOME_UNKNOWN").map((o) => o.name),
  );
  const counts: number[] = [];
  for (const n of NODES) {
    const rows = await db.query<Array<{ name: string }>>(
      n,
      "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT name FROM agent_definitions WHERE name LIKE ?",
      [`${prefix}%`],
    );
    const found = new Set(rows.map((r) => r.name));
    counts.push(found.size);
    expect(
      [...acknowledged].filter((name) => !found.has(name)),
      `lost, through node ${n}`,
    ).toEqual([]);
    expect(
      [...found].filter((name) => !acknowledged.has(name) && !inDoubt.has(name)),
      `stored though refused, through node ${n}`,
    ).toEqual([]);
  }
  expect(new Set(counts).size, `the nodes hold ${counts.join(", ")}`).toBe(1);
  console.log(
    `${prefix}: ${acknowledged.size} acknowledged, ${inDoubt.size} in doubt, ${counts[0]} stored; statuses ` +
      JSON.stringify(
        outcomes.reduce<Record<string, number>>((by, o) => {
          const key = `${o.status}${o.status === 503 ? ` ${o.body?.code}` : ""}`;
          by[key] = (by[key] ?? 0) + 1;
          return by;
        }, {}),
      ),
  );
}
