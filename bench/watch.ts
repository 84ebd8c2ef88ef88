/**
 * `npm run bench -- --watch`: issue 20's numbers for the watch. Each run starts a fresh service, writes
 * 100 definitions unmeasured (so the write path is compiled), and samples its idle RSS; then a process of
 * watchers (watch-worker.ts) opens `watchers` watches of the tenant from the list's revision, over SSE or
 * gRPC, and the RSS is sampled again with them connected; then new agents are POSTed at `rate` a second
 * (open loop: each at its time, whatever the ones before are doing) for `seconds`, and the peak RSS is
 * taken. Each write's revision is its answer's `meta.modRevision`; its commit time is taken two ways: its
 * acknowledgement (the answer's arrival at the writer: after the commit, so latency from it is a lower
 * bound by the answer's trip) and its send (before the commit: an upper bound, by the write's own time).
 * Every watcher must receive every write's revision exactly once, in order.
 *
 * SSE watchers hold a connection each, so the service runs with MAX_CONNECTIONS = watchers + 200 (at least
 * its default, 1,000, which 1,000 SSE watchers and a writer would exceed); gRPC's share connections.
 *
 * Limits (issue 20): RSS with the watchers connected ≤ idle + 64 MiB, every change delivered to every
 * watcher, commit-to-delivery p99 ≤ 500 ms (at 200 writes/s).
 */
import { type ChildProcess, fork } from "node:child_process";
import { Agent, request } from "node:http";
import { fileURLToPath } from "node:url";
import { benchBody, benchBodyTemplate } from "./definition.js";
import { cpuSeconds, cpuSecondsOf, loadAverage, peakRssKib, resetPeakRss, rssKib } from "./proc-stats.js";
import type { ServerProcess } from "./processes.js";
import type { Percentiles, WatchProtocol, WatchWorkerRequest, WatchWorkerResult } from "./watch-worker.js";

/** The writes of a run: new agents, or updates of existing keys. */
export type WatchWrites = "new" | "existing";

/** One run: how many watchers over which protocol, and how many writes a second. */
export interface WatchRun {
  readonly protocol: WatchProtocol;
  readonly watchers: number;
  readonly rate: number;
}

export interface WatchRunResult extends WatchRun {
  readonly seconds: number;
  /** Writes acknowledged (201), refused, and the rate reached. */
  readonly writes: number;
  readonly writeErrors: number;
  readonly achievedRate: number;
  readonly idleRssMib: number;
  readonly connectedRssMib: number;
  readonly peakRssMib: number;
  readonly watchersOpenFailed: number;
  readonly result: WatchWorkerResult;
  readonly loadBefore: number;
  readonly loadAfter: number;
  /** CPU used while writing and delivering (from the first write to the last arrival), % of one core. */
  readonly serviceCpu: number;
  readonly watchersCpu: number;
  /** The database server's (-1 when it runs in the service: SQLite) and the writer's (this process's). */
  readonly databaseCpu: number;
  readonly writerCpu: number;
}

export const RSS_LIMIT_MIB = 64;
export const P99_LIMIT_MS = 500;

/** `sse:1000x200` → { protocol: "sse", watchers: 1000, rate: 200 }. */
export function parseWatchRuns(text: string): WatchRun[] {
  return text.split(",").map((part) => {
    const match = /^(sse|grpc):(\d+)x(\d+)$/.exec(part.trim());
    if (match === null) throw new Error(`--watch-runs: "${part}" is not <sse|grpc>:<watchers>x<writes per second>`);
    return { protocol: match[1] as WatchProtocol, watchers: Number(match[2]), rate: Number(match[3]) };
  });
}

const now = (): number => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const mib = (kib: number): number => kib / 1024;

/** The median of `samples` RSS readings `every` ms apart, in MiB. */
async function rssMib(pid: number, samples = 5, every = 500): Promise<number> {
  const values: number[] = [];
  for (let i = 0; i < samples; i++) {
    values.push(rssKib(pid));
    if (i < samples - 1) await sleep(every);
  }
  return mib(values.sort((a, b) => a - b)[Math.floor(values.length / 2)] as number);
}

/** POSTs one new agent; resolves with its revision (undefined when refused) and when it was sent and acked. */
function post(
  service: ServerProcess,
  agent: Agent,
  authorization: string,
  tenant: string,
  body: string,
): Promise<{ revision: number | undefined; sent: number; acked: number; error?: string }> {
  return new Promise((resolve) => {
    const sent = now();
    const req = request(
      `${service.baseUrl}/api/asor/v1/${tenant}/agentDefinition`,
      { method: "POST", agent, headers: { authorization, "content-type": "application/json" } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          const acked = now();
          const text = Buffer.concat(chunks).toString("utf8");
          // 201 for a new agent, 200 for an existing key's update.
          if (res.statusCode !== 201 && res.statusCode !== 200)
            return resolve({ revision: undefined, sent, acked, error: text.slice(0, 300) });
          const meta = (JSON.parse(text) as { meta?: { modRevision?: string } }).meta;
          resolve({ revision: Number(meta?.modRevision), sent, acked });
        });
      },
    );
    req.on("error", (error) => resolve({ revision: undefined, sent, acked: now(), error: error.message }));
    req.end(body);
  });
}

/** The watchers' process. */
function startWatchers(): {
  child: ChildProcess;
  ask<T>(message: WatchWorkerRequest, answer: string): Promise<T>;
} {
  const child = fork(fileURLToPath(new URL("./watch-worker.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return {
    child,
    ask: <T>(message: WatchWorkerRequest, answer: string) =>
      new Promise<T>((resolve, reject) => {
        const onMessage = (reply: { type: string }) => {
          if (reply.type !== answer) return;
          child.off("message", onMessage);
          child.off("exit", onExit);
          resolve(reply as T);
        };
        const onExit = (code: number | null) => reject(new Error(`the watchers' process exited with ${code}`));
        child.on("message", onMessage);
        child.once("exit", onExit);
        child.send(message);
      }),
  };
}

export async function runWatch(
  startService: (env: Record<string, string>) => Promise<ServerProcess>,
  authorization: string,
  tenant: string,
  options: {
    runs: readonly WatchRun[];
    seconds: number;
    /** gRPC watchers' HTTP/2 window in bytes (undefined: grpc-js's 64 KiB). */
    grpcWindow?: number | undefined;
    /**
     * What each write is: a new agent (the default; one tenant's new agents take its sequence one at a time), or
     * an update of an existing key (the warm-up's 100 definitions in turn, each with a new overview).
     */
    writes?: WatchWrites | undefined;
    /** The database server's processes (none for SQLite), whose CPU is reported beside the service's. */
    databasePids?: readonly number[] | undefined;
    log(message: string): void;
  },
): Promise<WatchRunResult[]> {
  const { log } = options;
  const results: WatchRunResult[] = [];
  const template = benchBodyTemplate();
  let named = 0;
  const name = () => `Bench Watch ${Date.now().toString(36)} ${named++}`;
  for (const run of options.runs) {
    const loadBefore = loadAverage();
    // Each SSE watcher is a connection of its own: MAX_CONNECTIONS (default 1,000) must leave room for them.
    // All of them watch with one token, in one tenant: the watch limits (issue 50) are raised to let them.
    const service = await startService({
      MAX_CONNECTIONS: String(Math.max(1_000, run.watchers + 200)),
      WATCH_MAX_PER_TOKEN: String(run.watchers),
      WATCH_MAX_PER_TENANT: String(run.watchers),
      WATCH_MAX_HTTP1_PER_TENANT: String(run.watchers),
      WATCH_MAX_OPEN: String(Math.max(2_500, run.watchers + 1)),
    });
    const agent = new Agent({ keepAlive: true, maxSockets: 64 });
    const watchers = startWatchers();
    try {
      // Warm up the write path, unmeasured, then let the service settle.
      const existing = Array.from({ length: 100 }, name);
      for (const key of existing) await post(service, agent, authorization, tenant, benchBody(template, key));
      await sleep(2_000);
      const idleRssMib = await rssMib(service.pid);
      const list = await fetch(`${service.baseUrl}/api/asor/v1/${tenant}/agentDefinition?limit=1`, {
        headers: { authorization },
      });
      const since = Number(((await list.json()) as { revision: string }).revision);
      const t0 = performance.now();
      const opened = await watchers.ask<{ errors: number; firstError?: string }>(
        {
          type: "open",
          protocol: run.protocol,
          baseUrl: service.baseUrl,
          port: service.port,
          tenant,
          authorization,
          count: run.watchers,
          since,
          capacity: Math.ceil(run.rate * options.seconds * 1.2) + 100,
          grpcWindow: options.grpcWindow,
        },
        "opened",
      );
      log(
        `watch ${run.protocol} ${run.watchers} watchers open in ${((performance.now() - t0) / 1000).toFixed(1)} s` +
          (opened.errors > 0 ? `; ${opened.errors} failed: ${opened.firstError}` : ""),
      );
      await sleep(2_000);
      const connectedRssMib = await rssMib(service.pid);
      resetPeakRss(service.pid);

      // The writes, open loop: write i is sent at start + i / rate.
      const total = Math.round(run.rate * options.seconds);
      const writes: Promise<{ revision: number | undefined; sent: number; acked: number; error?: string }>[] = [];
      const start = performance.now();
      const databasePids = options.databasePids ?? [];
      const cpuBefore = {
        service: cpuSeconds(service.pid),
        watchers: cpuSeconds(watchers.child.pid ?? 0),
        database: cpuSecondsOf(databasePids),
        writer: process.cpuUsage(),
      };
      for (let i = 0; i < total; i++) {
        const due = start + (i * 1000) / run.rate;
        const wait = due - performance.now();
        if (wait > 1) await sleep(wait);
        const body =
          options.writes === "existing"
            ? benchBody(template, existing[i % existing.length] as string, `watch ${run.rate} ${i}`)
            : benchBody(template, name());
        writes.push(post(service, agent, authorization, tenant, body));
      }
      const done = await Promise.all(writes);
      const elapsed = (performance.now() - start) / 1000;
      const ok = done.filter((w) => w.revision !== undefined).sort((a, b) => (a.revision ?? 0) - (b.revision ?? 0));
      const writeErrors = done.length - ok.length;
      if (writeErrors > 0) {
        log(`  ${writeErrors} writes failed; the first: ${done.find((w) => w.error)?.error}`);
        if (service.stderr().trim() !== "") log(`  the service's stderr ends with:\n${service.stderr().slice(-3000)}`);
      }
      // The watchers are told each revision's times in order from since + 1: the writes must be exactly those.
      ok.forEach((w, i) => {
        if (w.revision !== since + 1 + i)
          throw new Error(`the writes' revisions are not ${since + 1}...: #${i} has ${w.revision}`);
      });
      const { result } = await watchers.ask<{ result: WatchWorkerResult }>(
        { type: "finish", sent: ok.map((w) => w.sent), acked: ok.map((w) => w.acked), waitMs: 30_000 },
        "result",
      );
      const peakRssMib = mib(peakRssKib(service.pid));
      const busy = (performance.now() - start) / 1000;
      const serviceCpu = (100 * (cpuSeconds(service.pid) - cpuBefore.service)) / busy;
      const watchersCpu = (100 * (cpuSeconds(watchers.child.pid ?? 0) - cpuBefore.watchers)) / busy;
      const databaseCpu =
        databasePids.length === 0 ? -1 : (100 * (cpuSecondsOf(databasePids) - cpuBefore.database)) / busy;
      const writerUsage = process.cpuUsage(cpuBefore.writer);
      const writerCpu = (writerUsage.user + writerUsage.system) / 10_000 / busy;
      const row: WatchRunResult = {
        ...run,
        seconds: options.seconds,
        writes: ok.length,
        writeErrors,
        achievedRate: ok.length / elapsed,
        idleRssMib,
        connectedRssMib,
        peakRssMib,
        watchersOpenFailed: opened.errors,
        result,
        loadBefore,
        loadAfter: loadAverage(),
        serviceCpu,
        watchersCpu,
        databaseCpu,
        writerCpu,
      };
      log(
        `watch ${run.protocol} ${run.watchers} watchers at ${run.rate}/s: RSS idle ${idleRssMib.toFixed(0)}, ` +
          `connected ${connectedRssMib.toFixed(0)}, peak ${peakRssMib.toFixed(0)} MiB; delivered ` +
          `${result.received}/${result.expected} (${result.complete} watchers complete); from ack p50 ` +
          `${result.fromAck.p50.toFixed(0)} p99 ${result.fromAck.p99.toFixed(0)} ms; CPU service ` +
          `${serviceCpu.toFixed(0)}% watchers ${watchersCpu.toFixed(0)}% database ` +
          `${databaseCpu < 0 ? "-" : `${databaseCpu.toFixed(0)}%`} writer ${writerCpu.toFixed(0)}%` +
          (result.failed > 0 ? `; ${result.failed} watchers failed: ${result.firstFailure}` : ""),
      );
      results.push(row);
    } finally {
      watchers.child.kill();
      agent.destroy();
      await service.stop();
    }
  }
  return results;
}

/** The share of the asked write rate a run must reach for its latencies to count as at that rate. */
export const RATE_REACHED = 0.95;

/** Whether a run met issue 20's limits: at the rate asked (RATE_REACHED of it), not at whatever the writer reached. */
export function watchRunMet(r: WatchRunResult): boolean {
  return (
    r.achievedRate >= RATE_REACHED * r.rate &&
    r.connectedRssMib - r.idleRssMib <= RSS_LIMIT_MIB &&
    r.writeErrors === 0 &&
    r.watchersOpenFailed === 0 &&
    r.result.complete === r.result.watchers &&
    r.result.fromAck.p99 <= P99_LIMIT_MS
  );
}

export function watchReport(results: readonly WatchRunResult[]): { markdown: string; met: boolean } {
  const f = (value: number, digits = 0) => (Number.isFinite(value) && value >= 0 ? value.toFixed(digits) : "-");
  const ms = (p: Percentiles) => `${f(p.p50)} / ${f(p.p99)} / ${f(p.max)}`;
  const lines = [
    "| watchers | writes/s asked (reached) | writes | RSS idle → connected (Δ) MiB | peak RSS while writing " +
      "MiB | delivered (watchers complete) | from ack p50 / p99 / max ms | from send p50 / p99 / max ms | " +
      "CPU service / watchers / database / writer % | load before → after | met |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
    ...results.map(
      (r) =>
        `| ${r.watchers} ${r.protocol === "sse" ? "SSE" : "gRPC"} | ${r.rate} (${f(r.achievedRate)}) | ${r.writes}` +
        `${r.writeErrors > 0 ? ` (+${r.writeErrors} failed)` : ""} | ${f(r.idleRssMib)} → ${f(r.connectedRssMib)} ` +
        `(+${f(r.connectedRssMib - r.idleRssMib)}) | ${f(r.peakRssMib)} | ${r.result.received}/${r.result.expected} ` +
        `(${r.result.complete}/${r.result.watchers}) | ${ms(r.result.fromAck)} | ${ms(r.result.fromSend)} | ` +
        `${f(r.serviceCpu)} / ${f(r.watchersCpu)} / ${f(r.databaseCpu)} / ${f(r.writerCpu)} | ` +
        `${f(r.loadBefore, 1)} → ${f(r.loadAfter, 1)} | ` +
        `${watchRunMet(r) ? "yes" : "**no**"} |`,
    ),
  ];
  const failures = results.filter((r) => r.result.failed > 0);
  for (const r of failures)
    lines.push(
      "",
      `${r.protocol} ${r.watchers}x${r.rate}: ${r.result.failed} watchers failed; the first: ${r.result.firstFailure}`,
    );
  return { markdown: lines.join("\n"), met: results.every(watchRunMet) };
}
