/**
 * `npm run bench -- --wire`: issue 19's doors side by side, with a client that
 * is not the bottleneck. GETs are loaded by h2load (nghttp2-client, C; installed
 * with apt-get when missing and the bench runs as root): one connection, ten
 * streams, REST, gRPC and Connect JSON asking for the same definition. POSTs
 * (an existing key, a new agent) need a new body per request, which h2load
 * cannot send: they are loaded by one node:http2 client in the bench process
 * with every body made before the clock starts, ten streams on one connection,
 * REST and gRPC alike (the service's write, ~1 ms, is far above the client's
 * cost per request). Each round runs every scenario once, in turn, so that
 * the machine's noise falls on all of them alike; the report gives each
 * scenario's median over the rounds, its latency percentiles, the service's
 * peak RSS, and the ratios the issue asks for.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, fromJson, toBinary } from "@bufbuild/protobuf";
import { AgentDefinitionSchema } from "../gen/asor/v1/agent_definition_pb.js";
import {
  GetAgentDefinitionRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../gen/asor/v1/agent_definition_service_pb.js";
import { benchBody, benchBodyTemplate } from "./definition.js";
import { cpuSeconds, peakRssKib, resetPeakRss } from "./proc-stats.js";
import type { ServerProcess } from "./processes.js";

const SERVICE = "/asor.v1.AgentDefinitionService";

export type WireScenario =
  | "rest get"
  | "grpc get"
  | "connect get"
  | "rest update"
  | "grpc update"
  | "rest create"
  | "grpc create";

export const WIRE_SCENARIOS: readonly WireScenario[] = [
  "rest get",
  "grpc get",
  "connect get",
  "rest update",
  "grpc update",
  "rest create",
  "grpc create",
];

export interface WireRun {
  readonly scenario: WireScenario;
  readonly round: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly requests: number;
  readonly failures: number;
  readonly peakRssMib: number;
  /** The service's CPU (user + system) over the run's wall time, warm-up included, in % of one core. */
  readonly cpuPercent: number;
  /** The service's CPU per request, µs: its CPU over the run divided by what it answered at the run's rate. */
  readonly cpuUsPerRequest: number;
}

export interface WireOptions {
  readonly tenant: string;
  /** The definition every GET asks for. */
  readonly id: string;
  /** Names of existing definitions, for the updates. */
  readonly names: readonly string[];
  readonly rounds: number;
  readonly durationSeconds: number;
  readonly warmupSeconds: number;
  /** Streams in flight on the one connection. */
  readonly streams: number;
  readonly only: RegExp | undefined;
  log(message: string): void;
}

/** h2load, installed from Debian's nghttp2-client when missing (as root); throws with what to do otherwise. */
export function ensureH2load(log: (message: string) => void): void {
  if (spawnSync("h2load", ["--version"]).status === 0) return;
  if (process.getuid?.() !== 0)
    throw new Error("h2load is missing: install Debian's nghttp2-client (apt-get install nghttp2-client)");
  log("installing nghttp2-client (h2load)");
  const install = spawnSync("apt-get", ["install", "-y", "nghttp2-client"], { stdio: "ignore" });
  if (install.status !== 0) {
    spawnSync("apt-get", ["update"], { stdio: "ignore" });
    execFileSync("apt-get", ["install", "-y", "nghttp2-client"], { stdio: "ignore" });
  }
}

/** The `p`th percentile of `values` (sorted in place), milliseconds from microseconds. */
function percentileMs(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  values.sort((a, b) => a - b);
  return values[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]! / 1000;
}

/** `message` in a gRPC envelope (uncompressed). */
export const envelope = (message: Uint8Array): Buffer => {
  const out = Buffer.alloc(5 + message.byteLength);
  out.writeUInt32BE(message.byteLength, 1);
  out.set(message, 5);
  return out;
};

/** One h2load run against `path`: requests per second and latencies from its per-request log. */
function h2load(
  service: ServerProcess,
  path: string,
  headers: Record<string, string>,
  body: Uint8Array | undefined,
  options: WireOptions,
): { rps: number; latenciesUs: number[]; requests: number; failures: number } {
  const dir = mkdtempSync(join(tmpdir(), "asor-wire-"));
  try {
    const args = [
      "-c",
      "1",
      "-m",
      String(options.streams),
      "-D",
      String(options.durationSeconds),
      `--warm-up-time=${options.warmupSeconds}`,
      `--log-file=${join(dir, "log")}`,
    ];
    for (const [name, value] of Object.entries(headers)) args.push("-H", `${name}: ${value}`);
    if (body !== undefined) {
      writeFileSync(join(dir, "body"), body);
      args.push("-d", join(dir, "body"));
    }
    args.push(`${service.baseUrl}${path}`);
    const run = spawnSync("h2load", args, { encoding: "utf8", maxBuffer: 16 * 1024 * 1024 });
    if (run.status !== 0) throw new Error(`h2load failed (${run.status}): ${run.stderr || run.stdout}`);
    const rps = Number(/finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(run.stdout)?.[1]);
    const counts = /requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored/.exec(
      run.stdout,
    );
    const latenciesUs = readFileSync(join(dir, "log"), "utf8")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => Number(line.split("\t")[2]));
    return {
      rps,
      latenciesUs,
      requests: Number(counts?.[1] ?? 0),
      failures: Number(counts?.[3] ?? 0) + Number(counts?.[4] ?? 0),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A request of a POST scenario, made before the clock starts. */
interface PreparedPost {
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: Uint8Array;
}

/**
 * `requests` POSTs, `streams` at a time on one HTTP/2 connection, for the warm-up and then `durationSeconds`;
 * a gRPC answer counts as a failure unless its trailers say `grpc-status: 0`.
 */
async function h2Posts(
  service: ServerProcess,
  next: () => PreparedPost,
  grpc: boolean,
  options: WireOptions,
): Promise<{ rps: number; latenciesUs: number[]; requests: number; failures: number }> {
  const session = connect(service.baseUrl);
  await new Promise<void>((resolve, reject) => session.once("connect", () => resolve()).once("error", reject));
  const one = (): Promise<{ ok: boolean; us: number }> =>
    new Promise((resolve) => {
      const request = next();
      const t0 = process.hrtime.bigint();
      const stream = session.request({ ":method": "POST", ":path": request.path, ...request.headers });
      let status = 0;
      let grpcStatus: string | undefined;
      stream.on("response", (h) => {
        status = Number(h[":status"]);
        grpcStatus ??= h["grpc-status"] as string | undefined;
      });
      stream.on("trailers", (h) => {
        grpcStatus = h["grpc-status"] as string | undefined;
      });
      stream.on("data", () => undefined);
      stream.on("error", () => undefined);
      stream.on("close", () => {
        const us = Number(process.hrtime.bigint() - t0) / 1000;
        resolve({ ok: grpc ? status === 200 && grpcStatus === "0" : status >= 200 && status < 300, us });
      });
      stream.end(request.body);
    });
  const phase = async (seconds: number) => {
    const end = performance.now() + seconds * 1000;
    const latenciesUs: number[] = [];
    let failures = 0;
    const loop = async () => {
      while (performance.now() < end) {
        const { ok, us } = await one();
        if (ok) latenciesUs.push(us);
        else failures++;
      }
    };
    const t0 = performance.now();
    await Promise.all(Array.from({ length: options.streams }, loop));
    const seconds_ = (performance.now() - t0) / 1000;
    return { rps: latenciesUs.length / seconds_, latenciesUs, requests: latenciesUs.length + failures, failures };
  };
  try {
    await phase(options.warmupSeconds);
    return await phase(options.durationSeconds);
  } finally {
    session.close();
  }
}

/** Every scenario once per round, in turn. */
export async function runWire(service: ServerProcess, authorization: string, options: WireOptions): Promise<WireRun[]> {
  const { tenant, id } = options;
  const restPath = `/api/asor/v1/${tenant}/agentDefinition`;
  const auth = { authorization };
  const grpcHeaders = { ...auth, "content-type": "application/grpc", te: "trailers" };
  const getMessage = toBinary(GetAgentDefinitionRequestSchema, create(GetAgentDefinitionRequestSchema, { tenant, id }));
  const template = benchBodyTemplate();
  // Bodies enough for the fastest run seen here (~3,000 writes/s) over warm-up and duration, with room.
  const perRun = Math.ceil(4000 * (options.durationSeconds + options.warmupSeconds));
  let edition = 0;
  let created = 0;
  const restPost = (body: string): PreparedPost => ({
    path: restPath,
    headers: { ...auth, "content-type": "application/json" },
    body: Buffer.from(body),
  });
  const grpcPost = (body: string): PreparedPost => ({
    path: `${SERVICE}/UpsertAgentDefinition`,
    headers: grpcHeaders,
    body: envelope(
      toBinary(
        UpsertAgentDefinitionRequestSchema,
        create(UpsertAgentDefinitionRequestSchema, {
          tenant,
          agentCardAndTools: fromJson(AgentDefinitionSchema, JSON.parse(body)),
        }),
      ),
    ),
  });
  /** Bodies made before the clock starts, taken in turn. */
  const prepared = (make: (i: number) => PreparedPost): (() => PreparedPost) => {
    const all = Array.from({ length: perRun }, (_, i) => make(i));
    let i = 0;
    return () => all[i++ % all.length]!;
  };

  // h2load counts an HTTP 200 as a success, and a gRPC error is a 200: each GET is checked once first.
  const preflight = async (path: string, headers: Record<string, string>, body: Uint8Array, grpc: boolean) => {
    const check = await h2Posts(service, () => ({ path, headers, body }), grpc, {
      ...options,
      streams: 1,
      warmupSeconds: 0,
      durationSeconds: 0.001,
    });
    if (check.failures > 0) throw new Error(`${path} does not answer its request: the scenario would measure errors`);
  };
  await preflight(`${SERVICE}/GetAgentDefinition`, grpcHeaders, envelope(getMessage), true);
  await preflight(
    `${SERVICE}/GetAgentDefinition`,
    { ...auth, "content-type": "application/json" },
    Buffer.from(JSON.stringify({ tenant, id })),
    false,
  );

  const runs: WireRun[] = [];
  for (let round = 1; round <= options.rounds; round++) {
    for (const scenario of WIRE_SCENARIOS) {
      if (options.only !== undefined && !options.only.test(scenario)) continue;
      let result: { rps: number; latenciesUs: number[]; requests: number; failures: number };
      resetPeakRss(service.pid);
      // The service's CPU and the wall clock from the moment the load starts: the POSTs' bodies are made before.
      let cpuBefore = 0;
      let wallBefore = 0;
      const startClock = (): void => {
        cpuBefore = cpuSeconds(service.pid);
        wallBefore = performance.now();
      };
      switch (scenario) {
        case "rest get":
          startClock();
          result = h2load(service, `${restPath}/${id}`, auth, undefined, options);
          break;
        case "grpc get":
          startClock();
          result = h2load(service, `${SERVICE}/GetAgentDefinition`, grpcHeaders, envelope(getMessage), options);
          break;
        case "connect get":
          startClock();
          result = h2load(
            service,
            `${SERVICE}/GetAgentDefinition`,
            { ...auth, "content-type": "application/json" },
            Buffer.from(JSON.stringify({ tenant, id })),
            options,
          );
          break;
        case "rest update":
        case "grpc update": {
          const make = scenario === "rest update" ? restPost : grpcPost;
          const next = prepared((i) =>
            make(benchBody(template, options.names[i % options.names.length]!, `w${round}${scenario[0]}${edition++}`)),
          );
          startClock();
          result = await h2Posts(service, next, scenario === "grpc update", options);
          break;
        }
        case "rest create":
        case "grpc create": {
          const make = scenario === "rest create" ? restPost : grpcPost;
          const next = prepared(() => make(benchBody(template, `Wire Agent ${created++}`)));
          startClock();
          result = await h2Posts(service, next, scenario === "grpc create", options);
          break;
        }
      }
      // A run that completed nothing (the service gone, h2load unable to connect) is a failure, not a zero.
      if (result.requests === 0 || !Number.isFinite(result.rps)) result = { ...result, failures: result.failures + 1 };
      const cpuShare = (cpuSeconds(service.pid) - cpuBefore) / ((performance.now() - wallBefore) / 1000);
      const run: WireRun = {
        scenario,
        round,
        rps: Number.isFinite(result.rps) ? result.rps : 0,
        p50Ms: percentileMs(result.latenciesUs, 50),
        p99Ms: percentileMs(result.latenciesUs, 99),
        requests: result.requests,
        failures: result.failures,
        peakRssMib: peakRssKib(service.pid) / 1024,
        cpuPercent: cpuShare * 100,
        cpuUsPerRequest: (cpuShare / result.rps) * 1e6,
      };
      options.log(
        `round ${round} ${scenario}: ${run.rps.toFixed(0)} req/s, ` +
          `p50 ${run.p50Ms.toFixed(2)} ms, p99 ${run.p99Ms.toFixed(2)} ms, ` +
          `${run.failures} failed, peak RSS ${run.peakRssMib.toFixed(0)} MiB, ` +
          `service CPU ${run.cpuPercent.toFixed(0)} % (${run.cpuUsPerRequest.toFixed(0)} µs a request)`,
      );
      runs.push(run);
    }
  }
  return runs;
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? Number.NaN : sorted[Math.floor((sorted.length - 1) / 2)]!;
};

/** The report: each scenario's medians over the rounds, and the ratios with their targets. */
export function wireReport(runs: readonly WireRun[]): { markdown: string; met: boolean } {
  const of = (scenario: WireScenario) => runs.filter((r) => r.scenario === scenario);
  const rows = WIRE_SCENARIOS.filter((s) => of(s).length > 0).map((s) => {
    const r = of(s);
    return {
      s,
      rps: median(r.map((x) => x.rps)),
      p50: median(r.map((x) => x.p50Ms)),
      p99: median(r.map((x) => x.p99Ms)),
      rss: Math.max(...r.map((x) => x.peakRssMib)),
      failures: r.reduce((n, x) => n + x.failures, 0),
      cpu: median(r.map((x) => x.cpuPercent)),
      cpuUs: median(r.map((x) => x.cpuUsPerRequest)),
    };
  });
  /**
   * The median over the rounds of `a`'s rate over `b`'s in the same round: scenarios of one round ran a few
   * seconds apart, so the machine's drift between rounds cancels out.
   */
  const ratio = (a: WireScenario, b: WireScenario): number => {
    const pairs = of(a).flatMap((x) =>
      of(b)
        .filter((y) => y.round === x.round)
        .map((y) => x.rps / y.rps),
    );
    return median(pairs);
  };
  const lines = [
    "| scenario | req/s (median) | p50 ms | p99 ms | peak RSS MiB | service CPU % | service CPU µs a request " +
      "| failed |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
    ...rows.map(
      (r) =>
        `| ${r.s} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} ` +
        `| ${r.rss.toFixed(0)} | ${r.cpu.toFixed(0)} | ${r.cpuUs.toFixed(0)} | ${r.failures} |`,
    ),
    "",
    "| ratio (median over the rounds of each round's ratio) | measured | target |",
    "|---|---:|---:|",
  ];
  const targets: [string, number, number][] = [
    ["gRPC GET / REST GET", ratio("grpc get", "rest get"), 1.0],
    ["gRPC POST existing key / REST", ratio("grpc update", "rest update"), 1.0],
    ["gRPC POST new agent / REST", ratio("grpc create", "rest create"), 1.0],
    ["Connect JSON GET / REST GET", ratio("connect get", "rest get"), 0.8],
  ];
  let met = true;
  for (const [label, value, target] of targets) {
    if (Number.isNaN(value)) continue;
    if (value < target) met = false;
    lines.push(`| ${label} | ${value.toFixed(2)}x | ≥ ${target.toFixed(1)}x |`);
  }
  const grpcGet = rows.find((r) => r.s === "grpc get");
  if (grpcGet !== undefined) {
    const spread = grpcGet.p99 / grpcGet.p50;
    if (spread > 4) met = false;
    lines.push(`| gRPC GET p99 / p50 | ${spread.toFixed(1)}x | ≤ 4x |`);
  }
  const peak = Math.max(...rows.map((r) => r.rss));
  if (peak > 150) met = false;
  lines.push(`| peak RSS, every scenario | ${peak.toFixed(0)} MiB | ≤ 150 MiB |`);
  if (rows.some((r) => r.failures > 0)) met = false;
  return { markdown: lines.join("\n"), met };
}
