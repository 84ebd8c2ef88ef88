/**
 * Issue 50's second scenario: 1,000 SSE watchers from one token beside a second tenant's clients. The service
 * runs as `npm start` runs it (the compiled entry, its heap bounds), on a fresh SQLite database; a second tenant
 * holds 20 definitions. Its clients list them (`rate` lists a second, open loop, a connection each) and ask
 * /healthz for `seconds`; after 2 s a process of watchers (watch-worker.ts, started before the clients, at nice
 * WATCHERS_NICE of the bench's environment) opens `watchers` SSE watches of the default tenant with one token,
 * all at once, and keeps those that opened. Reported: watches opened and refused (and how many of those the service
 * refused from their first bytes, asor_watches_refused_early_total), the second tenant's list and
 * /healthz latency (p50, p99, max) and their failures, the lists sent in the burst's 3 s and outside them, and
 * the burst's CPU (the service's, the watchers', the bench's own, from /proc) and listen queue overflows.
 * Limit (issue 50): the list's p99 ≤ 200 ms, no failed request. SERVICE_DIR=<checkout> runs another checkout's
 * service (built with its npm run build), for a before and after.
 *
 * FLOOD_SERVER=floor runs the same clients against bench/flood-floor.ts instead of the service: bare node:http,
 * no authentication or database, each watch past FLOOR_STREAMS (100) answered 429, the list a fixed page (the
 * KEY=VALUE settings go to it: FLOOR_BACKLOG, FLOOR_STREAMS, FLOOR_PAGE_BYTES). What any Node HTTP/1.1 server on
 * this machine can reach. LISTEN_BACKLOG=<n> (a setting) with `--import=./bench/listen-backlog.mjs` (a flag of the
 * service's node) listens the service with that backlog, without a change to it. FLOOD_TRACE=<file> writes every
 * list and probe (sent when, how long). The burst's line gives the server's event loop's wait for a CPU (its run
 * queue delay, /proc/<pid>/schedstat): on a shared machine, what the server did not get. bench/own-autogroup.sh
 * runs the bench ahead of the machine's other sessions, as if it had the machine.
 *
 *   node --import tsx bench/watch-flood.ts [watchers] [seconds] [rate] [KEY=VALUE settings of the service...]
 *     [--flags of the service's node, e.g. --cpu-prof --cpu-prof-dir=/tmp/flood...]
 */
import { fork } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { Agent, request } from "node:http";
import { setPriority, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAuthConfig } from "../src/auth/auth-config.js";
import { openLocalIssuer } from "../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../src/main/local-issuer-key-file.js";
import { benchBody, benchBodyTemplate } from "./definition.js";
import { percentile } from "./percentile.js";
import { cpuSeconds, loadAverage, runQueueSeconds } from "./proc-stats.js";
import { serviceCommand, startServer, tsxCommand } from "./processes.js";
import type { WatchWorkerRequest } from "./watch-worker.js";

const [watchers = 1_000, seconds = 20, rate = 50] = process.argv.slice(2, 5).map(Number);
/** The watchers' process's nice value (WATCHERS_NICE in the bench's environment; 0, as the bench's, by default). */
const watchersNice = Number(process.env.WATCHERS_NICE ?? 0);
const extra = process.argv.slice(5);
const settings = Object.fromEntries(
  extra.filter((arg) => !arg.startsWith("--")).map((kv) => kv.split("=", 2) as [string, string]),
);
/** node's own flags for the service (e.g. --cpu-prof --cpu-prof-dir=/tmp/p). */
const nodeArgs = extra.filter((arg) => arg.startsWith("--"));
const DOMAINS = ["Development", "Setup: Agents", "Setup: Tenants"];

const dataDir = await mkdtemp(join(tmpdir(), "watch-flood-"));
const issuer = await openLocalIssuer(localIssuerKeyFile(dataDir), parseAuthConfig({}).config);
const bearer = async (tenant: string, platformAdmin = false) =>
  `Bearer ${await issuer.issue({ tenant, domains: DOMAINS, platformAdmin, ttlSeconds: 3600 })}`;
/** The server under test: the service, or the floor (FLOOD_SERVER=floor); called "the service" below either way. */
const target = process.env.FLOOD_SERVER ?? "service";
if (target !== "service" && target !== "floor") throw new Error(`FLOOD_SERVER is service or floor, not ${target}`);
const service =
  target === "floor"
    ? await startServer(
        "the floor",
        tsxCommand("bench/flood-floor.ts"),
        "floor listening",
        { PORT: "0", ...settings },
        dataDir,
        nodeArgs,
      )
    : await startServer(
        "the service",
        serviceCommand(process.env.SERVICE_DIR),
        "agent definition registry listening",
        { DATA_DIR: dataDir, PORT: "0", LOG_LEVEL: "info", ...settings },
        dataDir,
        nodeArgs,
      );
console.log(
  `server: ${target}${extra.length === 0 ? "" : ` (${extra.join(" ")})`}; net.core.somaxconn ` +
    `${readFileSync("/proc/sys/net/core/somaxconn", "utf8").trim()}, load average ${loadAverage().toFixed(2)}`,
);
// A connection per request, as clients that come and go: a connection refused at accept (MAX_CONNECTIONS full)
// shows as a failed request, as the audit saw it.
const agent = new Agent({ keepAlive: false });

/** A request's answer: its status, its milliseconds, when it was sent (performance.now()), or its error. */
interface Result {
  readonly status: number;
  readonly ms: number;
  readonly at: number;
  readonly bytes: number;
  readonly error?: string;
}

/** The CPU seconds so far of the service, of the watchers' process and of this one, and the listen overflows. */
interface Sample {
  readonly at: number;
  readonly service: number;
  /** Seconds the service's event loop has waited, runnable, for a CPU (its main thread's run queue delay). */
  readonly serviceWaited: number;
  readonly child: number;
  readonly own: number;
  readonly overflows: number;
}

function sample(childPid?: number): Sample {
  const usage = process.cpuUsage();
  return {
    at: performance.now(),
    service: cpuSeconds(service.pid),
    serviceWaited: runQueueSeconds(service.pid),
    child: childPid === undefined ? 0 : cpuSeconds(childPid),
    own: (usage.user + usage.system) / 1e6,
    overflows: listenOverflows(),
  };
}

/**
 * TcpExt ListenOverflows of /proc/net/netstat: connections the kernel dropped because a listening socket's accept
 * queue was full (the client's SYN is retried after 1 s, then 3 s). The network namespace's count, so other
 * programs' listeners add to it.
 */
function listenOverflows(): number {
  const lines = readFileSync("/proc/net/netstat", "utf8").split("\n");
  const names = lines.find((line) => line.startsWith("TcpExt:"))?.split(" ") ?? [];
  const values = lines.filter((line) => line.startsWith("TcpExt:"))[1]?.split(" ") ?? [];
  return Number(values[names.indexOf("ListenOverflows")]);
}

/** The body of a GET of `path` (a plain request of its own, not on the clients' agent); empty when none in 5 s. */
async function text(path: string): Promise<string> {
  try {
    return await (await fetch(`${service.baseUrl}${path}`, { signal: AbortSignal.timeout(5_000) })).text();
  } catch {
    return "";
  }
}

/** One request on the clients' agent: its status and milliseconds, or its error. */
function call(
  method: string,
  path: string,
  authorization?: string,
  body?: string,
): Promise<{ status: number; ms: number; bytes: number; error?: string }> {
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
    req.on("error", (err) => resolve({ status: 0, ms: performance.now() - start, bytes: 0, error: err.message }));
    req.on("response", (res) => {
      let bytes = 0;
      res.on("data", (chunk: Buffer) => {
        bytes += chunk.length;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - start, bytes }));
    });
    req.end(body);
  });
}

try {
  const admin = await bearer("default", true);
  const made = await call(
    "POST",
    "/asor/v1/admin/tenants",
    admin,
    JSON.stringify({ name: "other", sequencePrefix: "OTHER-" }),
  );
  if (made.status !== 201) throw new Error(`the second tenant was not made: ${made.status}`);
  const other = await bearer("other");
  const template = benchBodyTemplate();
  for (let i = 0; i < 20; i++) {
    const written = await call(
      "POST",
      "/api/asor/v1/other/agentDefinition",
      other,
      benchBody(template, `Flood Other ${i}`),
    );
    if (written.status !== 201)
      throw new Error(`the second tenant's definition ${i} was not written: ${written.status}`);
  }
  const flooder = await bearer("default");

  // The watchers' process starts before anything is measured (tsx compiling it took a second of CPU on these 2
  // cores), at a lower priority when WATCHERS_NICE says so (e.g. 19: the service's CPU is then what is measured).
  const child = fork(fileURLToPath(new URL("./watch-worker.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const childPid = child.pid as number;
  if (watchersNice !== 0) setPriority(childPid, watchersNice);
  const opened = new Promise<{ errors: number; firstError?: string }>((resolve) =>
    child.on("message", (reply: { type: string; errors: number; firstError?: string }) => {
      if (reply.type === "opened") resolve(reply);
    }),
  );
  await new Promise((resolve) =>
    child.on("message", (reply: { type: string }) => reply.type === "ready" && resolve(0)),
  );

  const lists: Result[] = [];
  const probes: Result[] = [];
  const pending: Promise<unknown>[] = [];
  const begun = performance.now();
  const end = begun + seconds * 1000;
  const clients = (async () => {
    for (let n = 0; performance.now() < end; n++) {
      const wait = n * (1000 / rate) - (performance.now() - begun);
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      const at = performance.now();
      pending.push(
        call("GET", "/api/asor/v1/other/agentDefinition?limit=20", other).then((r) => lists.push({ ...r, at })),
      );
      if (n % 5 === 0) pending.push(call("GET", "/healthz").then((r) => probes.push({ ...r, at })));
    }
  })();

  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const asked = sample(childPid);
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
  // The burst: from the watchers' request to 3 s after it; CPU read from /proc at both ends.
  const afterBurst = new Promise<Sample>((resolve) => setTimeout(() => resolve(sample(childPid)), 3_000));
  const { errors, firstError } = await opened;
  const openedAt = sample(childPid);
  console.log(`watchers: ${watchers - errors} open, ${errors} refused (${firstError?.slice(0, 160) ?? "none"})`);
  const burst = await afterBurst;
  await clients;
  await Promise.all(pending);
  child.kill();
  // The service's count of watches refused from their first bytes (issue 50), asked once the clients are done;
  // none from the floor or a service without it.
  const metrics = target === "service" ? await text("/metrics") : "";
  const early = /^asor_watches_refused_early_total (\d+)$/m.exec(metrics)?.[1] ?? "none counted";
  console.log(`watchers refused from their first bytes: ${early}`);

  const report = (name: string, results: Result[]) => {
    const ms = results.map((r) => r.ms);
    const failed = results.filter((r) => r.status !== 200);
    return (
      `${name}: ${results.length} requests, p50 ${percentile(ms, 50).toFixed(1)} ms, p99 ` +
      `${percentile(ms, 99).toFixed(1)} ms, max ${Math.max(...ms).toFixed(1)} ms, ${failed.length} failed` +
      (failed[0] === undefined ? "" : ` (${failed[0].status} ${failed[0].error ?? ""})`)
    );
  };
  const inBurst = (r: Result) => r.at >= asked.at && r.at < burst.at;
  // FLOOD_TRACE=<file>: every list and probe as a line, `kind sent ms status`, sent in ms from the watchers' request
  // (performance.timeOrigin + asked.at on the wall clock, the first line), for a timeline of the burst.
  const traceFile = process.env.FLOOD_TRACE;
  if (traceFile !== undefined)
    writeFileSync(
      traceFile,
      [
        `asked ${(performance.timeOrigin + asked.at).toFixed(1)} opened ${(openedAt.at - asked.at).toFixed(1)}`,
        ...[...lists.map((r) => ["list", r] as const), ...probes.map((r) => ["healthz", r] as const)]
          .sort(([, a], [, b]) => a.at - b.at)
          .map(([kind, r]) => `${kind} ${(r.at - asked.at).toFixed(1)} ${r.ms.toFixed(1)} ${r.status}`),
      ].join("\n"),
    );
  const page = lists.find((r) => r.status === 200)?.bytes ?? 0;
  console.log(`${report("second tenant's list", lists)}; its answer ${page} bytes`);
  console.log(`  ${report("sent during the burst", lists.filter(inBurst))}`);
  console.log(
    `  ${report(
      "sent outside it",
      lists.filter((r) => !inBurst(r)),
    )}`,
  );
  console.log(report("/healthz", probes));
  const burstSeconds = (burst.at - asked.at) / 1000;
  const share = (a: number, b: number) => `${((100 * (b - a)) / burstSeconds).toFixed(0)} %`;
  console.log(
    `burst (${burstSeconds.toFixed(1)} s from the watchers' request; opened after ` +
      `${((openedAt.at - asked.at) / 1000).toFixed(2)} s, the service's CPU until then ` +
      `${(openedAt.service - asked.service).toFixed(2)} s, its event loop runnable but waiting for a CPU ` +
      `${(openedAt.serviceWaited - asked.serviceWaited).toFixed(2)} s): CPU of a core: the service ` +
      `${share(asked.service, burst.service)}, the watchers' process (nice ${watchersNice}) ` +
      `${share(asked.child, burst.child)}, this process ${share(asked.own, burst.own)}; ` +
      `listen queue overflows ${burst.overflows - asked.overflows} (the machine's), ` +
      `load average ${loadAverage().toFixed(2)}`,
  );
} finally {
  agent.destroy();
  await service.stop();
  await rm(dataDir, { recursive: true, force: true });
}
