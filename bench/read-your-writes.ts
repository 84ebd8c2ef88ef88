/**
 * Read-your-writes across replicas on a Galera cluster (issue 21, item 4):
 * three replicas of the service, one per node of the test cluster
 * (`npm run cluster -- start`), and workers that each POST a new definition
 * through one replica and at once GET it by id through the next. Per
 * DATABASE_SYNC_WAIT: pairs, the share of GETs that answered 404, pairs per
 * second, and the median POST and GET times.
 *
 *   npm run cluster -- start
 *   node --import tsx bench/read-your-writes.ts [--seconds 20] [--workers 8] [--sync-wait 0,1]
 *
 * CLUSTER_PORT_OFFSET moves the nodes' ports as it does for the cluster script.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { createConnection } from "mysql2/promise";
import { parseAuthConfig } from "../src/auth/auth-config.js";
import { openLocalIssuer } from "../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../src/main/local-issuer-key-file.js";
import { type ServerProcess, serviceCommand, startServer } from "./processes.js";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "20" },
    workers: { type: "string", default: "8" },
    "sync-wait": { type: "string", default: "0,1" },
  },
});
const seconds = Number(values.seconds);
const workers = Number(values.workers);
const syncWaits = (values["sync-wait"] ?? "0,1").split(",").map(Number);
const offset = Number(process.env.CLUSTER_PORT_OFFSET ?? 0);
const nodeUrl = (n: number, database = "") => `mysql://root@127.0.0.1:${3310 + offset + n}/${database}`;
const log = (line: string) => console.error(`[read-your-writes] ${line}`);

/** The median of some milliseconds. */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

async function measure(syncWait: number): Promise<string> {
  const database = `asor_ryw_${syncWait}_${process.pid}`;
  const admin = await createConnection({ uri: nodeUrl(1) });
  await admin.query(`CREATE DATABASE \`${database}\` CHARACTER SET utf8mb4`);
  const dataDir = await mkdtemp(join(tmpdir(), "asor-ryw-"));
  const servers: ServerProcess[] = [];
  try {
    const start = (n: number) =>
      startServer(
        `replica on node ${n}`,
        serviceCommand(undefined),
        "agent definition registry listening",
        {
          DATA_DIR: dataDir,
          DATABASE_URL: nodeUrl(n, database),
          DATABASE_SYNC_WAIT: String(syncWait),
          PORT: "0",
          LOG_LEVEL: "info",
        },
        dataDir,
      );
    // The first migrates the fresh database alone.
    servers.push(await start(1));
    servers.push(...(await Promise.all([start(2), start(3)])));
    const issuer = await openLocalIssuer(localIssuerKeyFile(dataDir), parseAuthConfig({}).config);
    const token = await issuer.issue({ tenant: "default", domains: ["Development", "Setup: Agents"] });
    const authorization = `Bearer ${token}`;
    const headers = { "content-type": "application/json", authorization };
    const base = (i: number) => `${servers[i % 3]!.baseUrl}/api/asor/v1/default/agentDefinition`;

    let pairs = 0;
    let notFound = 0;
    let failed = 0;
    const postMs: number[] = [];
    const getMs: number[] = [];
    const until = performance.now() + seconds * 1000;
    const began = performance.now();
    await Promise.all(
      Array.from({ length: workers }, async (_, w) => {
        for (let i = 0; performance.now() < until; i++) {
          const through = (w + i) % 3;
          const t0 = performance.now();
          const posted = await fetch(base(through), {
            method: "POST",
            headers,
            body: JSON.stringify({
              name: `Read your writes ${w}-${i}`,
              description: "Written through one replica, read through the next.",
              url: "https://agents.example.com/ryw",
              version: "1.0.0",
              provider: { id: "Provider=Acme" },
              skills: [{ id: "s1", name: "Skill", description: "One thing" }],
            }),
          });
          const body = (await posted.json()) as { id?: string };
          const t1 = performance.now();
          if (posted.status !== 201 || body.id === undefined) {
            failed++;
            continue;
          }
          const got = await fetch(`${base(through + 1)}/${body.id}`, { headers: { authorization } });
          await got.arrayBuffer();
          const t2 = performance.now();
          pairs++;
          postMs.push(t1 - t0);
          getMs.push(t2 - t1);
          if (got.status === 404) notFound++;
          else if (got.status !== 200) failed++;
        }
      }),
    );
    const elapsed = (performance.now() - began) / 1000;
    return (
      `| ${syncWait} | ${pairs} | ${notFound} (${((100 * notFound) / Math.max(1, pairs)).toFixed(2)} %) | ` +
      `${(pairs / elapsed).toFixed(1)} | ${median(postMs).toFixed(1)} | ${median(getMs).toFixed(1)} | ` +
      `${failed} |`
    );
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await admin.query(`DROP DATABASE IF EXISTS \`${database}\``);
    await admin.end();
    await rm(dataDir, { recursive: true, force: true });
  }
}

const rows: string[] = [];
for (const syncWait of syncWaits) {
  log(`DATABASE_SYNC_WAIT=${syncWait}: ${workers} workers for ${seconds} s`);
  rows.push(await measure(syncWait));
  log(rows.at(-1) ?? "");
}
console.log(
  "| DATABASE_SYNC_WAIT | POST+GET pairs | GET 404 | pairs/s | POST median ms | GET median ms | other failures |",
);
console.log("|---|---|---|---|---|---|---|");
for (const row of rows) console.log(row);
