/**
 * Issue 45's MCP number: `tools/call search_agents` over Streamable HTTP against the equivalent REST list, one
 * client with 10 requests in flight (autocannon, 10 connections), in alternate rounds against one service started
 * as `npm start` starts it (SQLite, or MariaDB with --mysql). The service holds 500 definitions; both ask for the
 * 20 first of those matching one word (`q`), so both run the same search and answer the same JSON (MCP twice: as
 * structured content and as text). Reported: requests per second of each round and MCP / REST (target ≥ 0.5),
 * and the service's CPU per request (from /proc), which a machine shared with other work moves less than the rate.
 *
 *   node --import tsx bench/mcp.ts [seconds per round, default 10] [rounds, default 3] [--mysql] [--node-flags...]
 *
 * Node flags (`--cpu-prof --cpu-prof-dir=<dir>`) go to the service's node.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { parseAuthConfig } from "../src/auth/auth-config.js";
import { openLocalIssuer } from "../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../src/main/local-issuer-key-file.js";
import { createBenchDatabase } from "./bench-database.js";
import { cpuSeconds, loadAverage } from "./proc-stats.js";
import { serviceCommand, startServer } from "./processes.js";

const args = process.argv.slice(2);
const numbers = args.filter((a) => /^\d+$/.test(a)).map(Number);
const seconds = numbers[0] ?? 10;
const rounds = numbers[1] ?? 3;
const mysql = args.includes("--mysql");
const nodeArgs = args.filter((a) => a.startsWith("--") && a !== "--mysql");
const DEFINITIONS = 500;

const dataDir = await mkdtemp(join(tmpdir(), "mcp-bench-"));
const database = await createBenchDatabase({
  serverUrl: mysql ? (process.env.BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306") : undefined,
  name: "asor_bench_mcp",
  dataDir,
  tenant: "bench",
  sequencePrefix: "B-",
});
const issuer = await openLocalIssuer(localIssuerKeyFile(dataDir), parseAuthConfig({}).config);
const authorization = `Bearer ${await issuer.issue({
  tenant: "bench",
  domains: ["Development", "Setup: Agents"],
  ttlSeconds: 3600,
})}`;
const service = await startServer(
  "the service",
  serviceCommand(process.env.SERVICE_DIR),
  "agent definition registry listening",
  {
    DATA_DIR: dataDir,
    PORT: "0",
    ...(database.databaseUrl === undefined ? {} : { DATABASE_URL: database.databaseUrl }),
  },
  dataDir,
  nodeArgs,
);

const WORDS = ["weather", "recipe", "travel", "finance", "music"];
try {
  for (let i = 0; i < DEFINITIONS; i++) {
    const res = await fetch(`${service.baseUrl}/api/asor/v1/bench/agentDefinition`, {
      method: "POST",
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify({
        name: `Agent ${i}`,
        description: `A ${WORDS[i % WORDS.length]} agent, number ${i}.`,
        url: `https://agents.example.com/${i}`,
        version: "1.0.0",
        provider: { id: "Provider=Bench" },
        skills: [{ id: "s", name: "Skill", description: `Answers ${WORDS[i % WORDS.length]} questions.` }],
      }),
    });
    if (res.status !== 201) throw new Error(`seeding: ${res.status} ${await res.text()}`);
  }
  const rest = { method: "GET" as const, path: "/api/asor/v1/bench/agentDefinition?q=weather&limit=20" };
  const mcp = {
    method: "POST" as const,
    path: "/mcp",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "search_agents", arguments: { q: "weather", limit: 20 } },
    }),
  };
  const round = async (request: typeof rest | typeof mcp) => {
    const cpuBefore = cpuSeconds(service.pid);
    const result = await autocannon({
      url: service.baseUrl,
      connections: 10,
      duration: seconds,
      headers: { authorization, ...("headers" in request ? request.headers : {}) },
      requests: [request],
    });
    const failed = result.non2xx + result.errors + result.timeouts;
    if (failed > 0) throw new Error(`${request.path}: ${failed} failed requests`);
    const cpuMs = ((cpuSeconds(service.pid) - cpuBefore) * 1000) / result.requests.total;
    return { rate: result.requests.average, cpuMs };
  };
  const ratios: number[] = [];
  const cpuRatios: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const load = loadAverage();
    const byRest = await round(rest);
    const byMcp = await round(mcp);
    ratios.push(byMcp.rate / byRest.rate);
    cpuRatios.push(byRest.cpuMs / byMcp.cpuMs);
    console.log(
      `round ${r + 1} (load ${load.toFixed(1)}): REST list ${byRest.rate.toFixed(0)} req/s ` +
        `${byRest.cpuMs.toFixed(2)} ms CPU each, MCP search_agents ${byMcp.rate.toFixed(0)} req/s ` +
        `${byMcp.cpuMs.toFixed(2)} ms CPU each`,
    );
  }
  const list = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(", ");
  console.log(`MCP / REST throughput: ${list(ratios)}; REST CPU / MCP CPU per request: ${list(cpuRatios)} (>= 0.5)`);
} finally {
  await service.stop();
  await database.drop();
  await rm(dataDir, { recursive: true, force: true });
}
