/**
 * Issue 50's second scenario: 1,000 SSE watchers from one token beside a second tenant's clients. The service
 * runs as `npm start` runs it (the compiled entry, its heap bounds), on a fresh SQLite database; a second tenant
 * holds 20 definitions. Its clients list them (`rate` lists a second, open loop, a connection each) and ask
 * /healthz for `seconds`; after 2 s a process of watchers (watch-worker.ts) opens `watchers` SSE watches of
 * the default tenant with one token, all at once, and keeps those that opened. Reported: watches opened and
 * refused, the second tenant's list and /healthz latency (p50, p99, max) and their failures.
 * Limit (issue 50): the list's p99 ≤ 200 ms, no failed request.
 *
 *   node --import tsx bench/watch-flood.ts [watchers] [seconds] [rate] [KEY=VALUE settings of the service...]
 */
import { fork } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAuthConfig } from "../src/auth/auth-config.js";
import { openLocalIssuer } from "../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../src/main/local-issuer-key-file.js";
import { benchBody, benchBodyTemplate } from "./definition.js";
import { percentile } from "./percentile.js";
import { serviceCommand, startServer } from "./processes.js";
import type { WatchWorkerRequest } from "./watch-worker.js";

const [watchers = 1_000, seconds = 20, rate = 50] = process.argv.slice(2, 5).map(Number);
const settings = Object.fromEntries(process.argv.slice(5).map((kv) => kv.split("=", 2) as [string, string]));
const DOMAINS = ["Development", "Setup: Agents", "Setup: Tenants"];

const dataDir = await mkdtemp(join(tmpdir(), "watch-flood-"));
const issuer = await openLocalIssuer(localIssuerKeyFile(dataDir), parseAuthConfig({}).config);
const bearer = async (tenant: string, platformAdmin = false) =>
  `Bearer ${await issuer.issue({ tenant, domains: DOMAINS, platformAdmin, ttlSeconds: 3600 })}`;
const service = await startServer(
  "the service",
  serviceCommand(undefined),
  "agent definition registry listening",
  { DATA_DIR: dataDir, PORT: "0", LOG_LEVEL: "info", ...settings },
  dataDir,
);
// A connection per request, as clients that come and go: a connection refused at accept (MAX_CONNECTIONS full)
// shows as a failed request, as the audit saw it.
const agent = new Agent({ keepAlive: false });

/** One request on the clients' agent: its status and milliseconds, or its error. */
function call(
  method: string,
  path: string,
  authorization?: string,
  body?: string,
): Promise<{ status: number; ms: number; error?: string }> {
  const start = performance.now();
  return new Promise((resolve) => {
    const req = request(`${service.baseUrl}${path}`, {
      method,
      agent,
      headers: {
        ...(authorization === undefined ? {} : { authorization }),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
    });
    req.on("error", (err) => resolve({ status: 0, ms: performance.now() - start, error: err.message }));
    req.on("response", (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - start }));
    });
    req.end(body);
  });
}

try {
  const admin = await bearer("default", true);
  const made = await call("POST", "/asor/v1/admin/tenants", admin, JSON.stringify({ name: "other" }));
  if (made.status !== 201) throw new Error(`the second tenant was not made: ${made.status}`);
  const other = await bearer("other");
  const template = benchBodyTemplate();
  for (let i = 0; i < 20; i++)
    await call("POST", "/api/asor/v1/other/agentDefinition", other, benchBody(template, `Flood Other ${i}`));
  const flooder = await bearer("default");

  const lists: { status: number; ms: number; error?: string }[] = [];
  const probes: { status: number; ms: number; error?: string }[] = [];
  const pending: Promise<unknown>[] = [];
  const end = performance.now() + seconds * 1000;
  const clients = (async () => {
    for (let n = 0; performance.now() < end; n++) {
      const at = n * (1000 / rate);
      const wait = at - (performance.now() - (end - seconds * 1000));
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      pending.push(call("GET", "/api/asor/v1/other/agentDefinition?limit=20", other).then((r) => lists.push(r)));
      if (n % 5 === 0) pending.push(call("GET", "/healthz").then((r) => probes.push(r)));
    }
  })();

  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const child = fork(fileURLToPath(new URL("./watch-worker.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const opened = new Promise<{ errors: number; firstError?: string }>((resolve) =>
    child.on("message", (reply: { type: string; errors: number; firstError?: string }) => {
      if (reply.type === "opened") resolve(reply);
    }),
  );
  const open: WatchWorkerRequest = {
    type: "open",
    protocol: "sse",
    baseUrl: service.baseUrl,
    port: service.port,
    tenant: "default",
    authorization: flooder,
    count: watchers,
    since: 0,
    capacity: 10,
  };
  child.send(open);
  const { errors, firstError } = await opened;
  console.log(`watchers: ${watchers - errors} open, ${errors} refused (${firstError?.slice(0, 160) ?? "none"})`);
  await clients;
  await Promise.all(pending);
  child.kill();

  const report = (name: string, results: { status: number; ms: number; error?: string }[]) => {
    const ms = results.map((r) => r.ms);
    const failed = results.filter((r) => r.status !== 200);
    console.log(
      `${name}: ${results.length} requests, p50 ${percentile(ms, 50).toFixed(1)} ms, p99 ` +
        `${percentile(ms, 99).toFixed(1)} ms, max ${Math.max(...ms).toFixed(1)} ms, ${failed.length} failed` +
        (failed[0] === undefined ? "" : ` (${failed[0].status} ${failed[0].error ?? ""})`),
    );
  };
  report("second tenant's list", lists);
  report("/healthz", probes);
} finally {
  agent.destroy();
  await service.stop();
  await rm(dataDir, { recursive: true, force: true });
}
