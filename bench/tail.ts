/**
 * `node --import tsx bench/tail.ts`: where the tail of a GET comes from (issue 19, "p99 of gRPC GET ≤ 4x
 * its p50"). Starts one service per variant (node flags added to package.json's config.nodeFlags, later
 * flags win) on one MariaDB database of its own, then, round after round, loads each variant with h2load
 * (REST GET by id and gRPC GetAgentDefinition, each load shape given) in turn, so that the machine's noise
 * falls on all of them alike. For each run it keeps h2load's per-request log and lays beside it:
 *
 * - the service's garbage collections (bench/tail-probe.mjs, epoch times from `PerformanceObserver`);
 * - how long the service's event-loop thread, h2load and MariaDB waited for a CPU (the kernel's
 *   `/proc/<pid>/schedstat` run delay), sampled every 2 ms for the first two, before and after for MariaDB.
 *
 * A request is slow when it took more than 4x the run's p50 (the issue's line). Slow requests that overlap
 * each other make one episode; each episode is put down to what overlapped it: a GC pause, a wait of the
 * service's thread for a CPU (≥ 1 ms in a 2 ms sample), a wait of h2load's, or nothing seen.
 *
 *   node --import tsx bench/tail.ts [--rounds 5] [--duration 5] [--warmup 1]
 *     [--variant name=flags ...]  e.g. --variant semi2= --variant semi16=--max-semi-space-size=16
 *     [--shape c1m10 ...]          h2load -c/-m: c1m10 (the wire bench's), c1m1, c10m1, ...
 *     [--scenario rest|grpc|connect ...] [--out dir]  (keeps the logs)  [--sqlite]  (the embedded database: no MariaDB)
 *     [--nice=-20]                 the service and h2load (and this session's autogroup) ahead of the machine's
 *                                  other work: what the tail is on a quiet machine, MariaDB left as it is
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { create, toBinary } from "@bufbuild/protobuf";
import { GetAgentDefinitionRequestSchema } from "../gen/asor/v1/agent_definition_service_pb.js";
import { parseAuthConfig } from "../src/auth/auth-config.js";
import { openLocalIssuer } from "../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../src/main/local-issuer-key-file.js";
import { createBenchDatabase } from "./bench-database.js";
import { peakRssKib, resetPeakRss } from "./proc-stats.js";
import { repoRoot, type ServerProcess, serviceCommand, startServer } from "./processes.js";
import { openSeeder } from "./seed.js";
import { ensureH2load, envelope } from "./wire.js";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "5" },
    duration: { type: "string", default: "5" },
    warmup: { type: "string", default: "1" },
    variant: { type: "string", multiple: true, default: ["base="] },
    shape: { type: "string", multiple: true, default: ["c1m10"] },
    scenario: { type: "string", multiple: true, default: ["rest", "grpc"] },
    mysql: { type: "string", default: "mysql://root@127.0.0.1:3306" },
    database: { type: "string", default: "asor_bench_tail" },
    out: { type: "string" },
    "heap-profile": { type: "boolean", default: false },
    nice: { type: "string" },
    sqlite: { type: "boolean", default: false },
  },
});
const rounds = Number(values.rounds);
const duration = Number(values.duration);
const warmup = Number(values.warmup);
const TENANT = "bench";
const log = (message: string): void => console.error(`[tail ${new Date().toISOString().slice(11, 19)}] ${message}`);

interface Gc {
  readonly start: number; // epoch ms
  readonly ms: number;
  readonly kind: string;
}
/** A schedstat sample: epoch ms, run delay so far (ns). */
type Sample = readonly [number, number];

const schedDelayNs = (path: string): number => {
  try {
    return Number(readFileSync(path, "utf8").split(" ")[1]);
  } catch {
    return Number.NaN;
  }
};
/** Run delay of every thread of `pid` (ns). */
const processDelayNs = (pid: number): number => {
  try {
    return readdirSync(`/proc/${pid}/task`).reduce(
      (sum, tid) => sum + (schedDelayNs(`/proc/${pid}/task/${tid}/schedstat`) || 0),
      0,
    );
  } catch {
    return Number.NaN;
  }
};
const mariadbPid = (): number | undefined => {
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
      if (comm === "mariadbd" || comm === "mysqld") return Number(pid);
    } catch {}
  }
  return undefined;
};

/** Intervals (epoch ms) in which a sampled thread waited ≥ `minMs` for a CPU. */
function waits(samples: readonly Sample[], minMs: number): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 1; i < samples.length; i++) {
    const waited = (samples[i]![1] - samples[i - 1]![1]) / 1e6;
    if (waited >= minMs) out.push([samples[i - 1]![0], samples[i]![0]]);
  }
  return out;
}
const overlaps = (a: readonly [number, number], b: readonly [number, number]): boolean => a[0] < b[1] && b[0] < a[1];
const pct = (sorted: readonly number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

interface RunResult {
  readonly variant: string;
  readonly shape: string;
  readonly scenario: string;
  readonly round: number;
  readonly rps: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly p999: number;
  readonly max: number;
  readonly requests: number;
  readonly slow: number;
  readonly episodes: number;
  readonly byCause: Record<string, number>;
  readonly gcCount: Record<string, number>;
  readonly gcPauseMsPerS: number;
  readonly gcMaxMs: number;
  readonly serviceWaitMsPerS: number;
  readonly h2loadWaitMsPerS: number;
  readonly mariadbWaitMsPerS: number;
  readonly rssMib: number;
}

async function h2loadRun(
  service: ServerProcess,
  scenario: string,
  shape: string,
  authorization: string,
  id: string,
  gcFile: string,
  dir: string,
  heapFile: string | undefined,
): Promise<Omit<RunResult, "variant" | "shape" | "scenario" | "round">> {
  const [, c, m] = /^c(\d+)m(\d+)$/.exec(shape) ?? [];
  if (c === undefined || m === undefined) throw new Error(`--shape ${shape}: expected c<connections>m<streams>`);
  const logFile = join(dir, "log");
  rmSync(logFile, { force: true }); // h2load appends to a log file that exists
  const args = ["-c", c, "-m", m, "-D", String(duration), `--warm-up-time=${warmup}`, `--log-file=${logFile}`];
  args.push("-H", `authorization: ${authorization}`);
  if (scenario === "grpc") {
    writeFileSync(
      join(dir, "body"),
      envelope(
        toBinary(GetAgentDefinitionRequestSchema, create(GetAgentDefinitionRequestSchema, { tenant: TENANT, id })),
      ),
    );
    args.push("-H", "content-type: application/grpc", "-H", "te: trailers", "-d", join(dir, "body"));
    args.push(`${service.baseUrl}/asor.v1.AgentDefinitionService/GetAgentDefinition`);
  } else if (scenario === "connect") {
    // A Connect unary JSON POST, as the wire bench's "connect get" sends it.
    writeFileSync(join(dir, "body"), JSON.stringify({ tenant: TENANT, id }));
    args.push("-H", "content-type: application/json", "-d", join(dir, "body"));
    args.push(`${service.baseUrl}/asor.v1.AgentDefinitionService/GetAgentDefinition`);
  } else args.push(`${service.baseUrl}/api/asor/v1/${TENANT}/agentDefinition/${id}`);
  writeFileSync(gcFile, "");
  resetPeakRss(service.pid);
  const mariadb = mariadbPid();
  const settle = () => new Promise((resolve) => setTimeout(resolve, 50));
  /** Asks the probe for its allocation profile (it starts a fresh one) and waits for the file. */
  const heapProfile = async (): Promise<Buffer> => {
    rmSync(heapFile!, { force: true });
    process.kill(service.pid, "SIGUSR2");
    for (let i = 0; i < 200; i++) {
      await settle();
      try {
        return readFileSync(heapFile!);
      } catch {}
    }
    throw new Error("the probe wrote no allocation profile");
  };
  if (heapFile !== undefined) await heapProfile(); // a fresh allocation profile for this run
  const child = spawn(
    values.nice === undefined ? "h2load" : "nice",
    values.nice === undefined ? args : ["-n", values.nice, "h2load", ...args],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let stdout = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  const serviceSamples: Sample[] = [];
  const h2loadSamples: Sample[] = [];
  const mariadbBefore = mariadb === undefined ? Number.NaN : processDelayNs(mariadb);
  const sampler = setInterval(() => {
    const now = Date.now();
    serviceSamples.push([now, schedDelayNs(`/proc/${service.pid}/task/${service.pid}/schedstat`)]);
    h2loadSamples.push([now, schedDelayNs(`/proc/${child.pid}/schedstat`)]);
  }, 2);
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  clearInterval(sampler);
  const mariadbAfter = mariadb === undefined ? Number.NaN : processDelayNs(mariadb);
  if (code !== 0) throw new Error(`h2load failed (${code}): ${stdout}`);
  const rss = peakRssKib(service.pid) / 1024;
  if (heapFile !== undefined) writeFileSync(join(dir, "allocations.heapprofile"), await heapProfile());
  await new Promise((resolve) => setTimeout(resolve, 400)); // the probe writes every 250 ms
  const rps = Number(/finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(stdout)?.[1]);
  const requests = readFileSync(logFile, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => {
      const [start, , us] = l.split("\t");
      return { start: Number(start) / 1000, ms: Number(us) / 1000 };
    });
  if (values.out !== undefined) writeFileSync(`${dir}.gc`, readFileSync(gcFile));
  const t0 = Math.min(...requests.map((r) => r.start));
  const t1 = Math.max(...requests.map((r) => r.start + r.ms));
  const seconds = (t1 - t0) / 1000;
  const gcs: Gc[] = readFileSync(gcFile, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => {
      const [start, ms, kind] = l.split("\t");
      return { start: Number(start), ms: Number(ms), kind: kind! };
    })
    .filter((g) => g.start >= t0 && g.start <= t1);
  const sorted = requests.map((r) => r.ms).sort((a, b) => a - b);
  const p50 = pct(sorted, 50);
  // Episodes: slow requests merged where their intervals overlap.
  const slow = requests.filter((r) => r.ms > 4 * p50).sort((a, b) => a.start - b.start);
  const episodes: [number, number][] = [];
  for (const r of slow) {
    const last = episodes.at(-1);
    if (last !== undefined && r.start <= last[1]) last[1] = Math.max(last[1], r.start + r.ms);
    else episodes.push([r.start, r.start + r.ms]);
  }
  const serviceWaits = waits(serviceSamples, 1);
  const h2loadWaits = waits(h2loadSamples, 1);
  const byCause: Record<string, number> = {
    gc: 0,
    "service waited for a CPU": 0,
    "h2load waited for a CPU": 0,
    "nothing seen": 0,
  };
  for (const e of episodes) {
    const causes = [];
    if (gcs.some((g) => g.ms >= 1 && overlaps(e, [g.start, g.start + g.ms]))) causes.push("gc");
    if (serviceWaits.some((w) => overlaps(e, w))) causes.push("service waited for a CPU");
    if (h2loadWaits.some((w) => overlaps(e, w))) causes.push("h2load waited for a CPU");
    if (causes.length === 0) causes.push("nothing seen");
    for (const cause of causes) byCause[cause]! += 1;
  }
  const gcCount: Record<string, number> = {};
  for (const g of gcs) gcCount[g.kind] = (gcCount[g.kind] ?? 0) + 1;
  // Over the sampled span (warm-up included).
  const delay = (s: readonly Sample[]) =>
    s.length < 2 ? Number.NaN : (s.at(-1)![1] - s[0]![1]) / 1e6 / ((s.at(-1)![0] - s[0]![0]) / 1000);
  return {
    rps,
    p50,
    p90: pct(sorted, 90),
    p99: pct(sorted, 99),
    p999: pct(sorted, 99.9),
    max: sorted.at(-1)!,
    requests: requests.length,
    slow: slow.length,
    episodes: episodes.length,
    byCause,
    gcCount,
    gcPauseMsPerS: gcs.reduce((s, g) => s + g.ms, 0) / seconds,
    gcMaxMs: Math.max(0, ...gcs.map((g) => g.ms)),
    serviceWaitMsPerS: delay(serviceSamples),
    h2loadWaitMsPerS: delay(h2loadSamples),
    mariadbWaitMsPerS: (mariadbAfter - mariadbBefore) / 1e6 / (duration + warmup),
    rssMib: rss,
  };
}

/** One round's GCs of each kind per 1,000 requests, to one decimal. */
const gcPerThousand = (r: RunResult): Record<string, number> =>
  Object.fromEntries(Object.entries(r.gcCount).map(([k, n]) => [k, Math.round((10000 * n) / r.requests) / 10]));

const perThousand = (rs: readonly RunResult[], kind: string): string =>
  ((1000 * rs.reduce((s, r) => s + (r.gcCount[kind] ?? 0), 0)) / rs.reduce((s, r) => s + r.requests, 0)).toFixed(1);

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
};

async function main(): Promise<void> {
  ensureH2load(log);
  // With the kernel's autogroups (sched_autogroup_enabled) a nice value weighs only within its session's group:
  // --nice sets this session's group too (this process and its children, nothing of anyone else's).
  // The group outlives this process (it is the session's): its value is put back at the end.
  let groupNice: string | undefined;
  if (values.nice !== undefined) {
    try {
      groupNice = /nice (-?\d+)/.exec(readFileSync("/proc/self/autogroup", "utf8"))?.[1];
      writeFileSync("/proc/self/autogroup", values.nice);
    } catch (error) {
      log(`could not set this session's autogroup nice value: ${String(error)}`);
    }
  }
  // "asor-bench-": the seeding bulk-loads only a bench data dir (bulk-load.ts, benchDatabaseGuard).
  const work = mkdtempSync(join(tmpdir(), "asor-bench-tail-"));
  const out = values.out ?? work;
  mkdirSync(out, { recursive: true });
  const cleanup: (() => Promise<unknown>)[] = [];
  try {
    const database = await createBenchDatabase({
      serverUrl: values.sqlite ? undefined : values.mysql,
      name: values.database!,
      dataDir: work,
      tenant: TENANT,
      sequencePrefix: "BENCH-",
    });
    cleanup.push(() => database.drop());
    const seeder = await openSeeder({ databaseUrl: database.databaseUrl, dataDir: work, tenant: TENANT });
    cleanup.unshift(() => seeder.close());
    await seeder.topUp(1000);
    const { ids } = await seeder.sample(1000);
    const id = ids[0]!;
    const issuer = await openLocalIssuer(localIssuerKeyFile(work), parseAuthConfig({}).config);
    const token = await issuer.issue({
      tenant: TENANT,
      domains: ["Development", "Setup: Agents"],
      ttlSeconds: 3 * 3600,
    });
    const authorization = `Bearer ${token}`;

    const base = serviceCommand(undefined);
    const entry = base.args.at(-1)!;
    const services: { name: string; service: ServerProcess; gcFile: string; heapFile: string | undefined }[] = [];
    for (const v of values.variant!) {
      const [name, ...rest] = v.split("=");
      const flags = rest
        .join("=")
        .split(" ")
        .filter((f) => f !== "");
      const gcFile = join(work, `${name}.gc`);
      const heapFile = values["heap-profile"] ? join(work, `${name}.heapprofile`) : undefined;
      const nodeArgs = [...base.args.slice(0, -1), ...flags, "--import", join(repoRoot, "bench/tail-probe.mjs"), entry];
      // --nice: the service (and h2load) ahead of the machine's other work, `nice -n` execs node (same pid).
      const command =
        values.nice === undefined
          ? { ...base, args: nodeArgs }
          : { ...base, executable: "nice", args: ["-n", values.nice, process.execPath, ...nodeArgs] };
      const service = await startServer(
        `service ${name}`,
        command,
        "agent definition registry listening",
        {
          DATA_DIR: work,
          ...(database.databaseUrl === undefined ? {} : { DATABASE_URL: database.databaseUrl }),
          PORT: "0",
          LOG_LEVEL: "info",
          TAIL_PROBE_FILE: gcFile,
          TAIL_HEAP_PROFILE: heapFile ?? "",
        },
        out,
      );
      cleanup.unshift(() => service.stop());
      services.push({ name: name!, service, gcFile, heapFile });
      log(`variant ${name}: node ${command.args.slice(0, -1).join(" ")} (pid ${service.pid})`);
    }
    const load = loadavg()[0]!;
    const results: RunResult[] = [];
    for (let round = 1; round <= rounds; round++) {
      // Each round starts with another variant, so that none always runs first (or right after another).
      const order = services.map((_, i) => services[(i + round - 1) % services.length]!);
      for (const shape of values.shape!)
        for (const scenario of values.scenario!)
          for (const v of order) {
            const dir = join(out, `${v.name}-${shape}-${scenario}-${round}`);
            mkdirSync(dir, { recursive: true });
            const r = {
              variant: v.name,
              shape,
              scenario,
              round,
              ...(await h2loadRun(v.service, scenario, shape, authorization, id, v.gcFile, dir, v.heapFile)),
            };
            if (values.out === undefined) rmSync(dir, { recursive: true, force: true });
            results.push(r);
            log(
              `round ${round} ${v.name} ${shape} ${scenario}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50.toFixed(2)} ` +
                `p99 ${r.p99.toFixed(2)} ` +
                `(${(r.p99 / r.p50).toFixed(1)}x) max ${r.max.toFixed(1)} ms; slow ${r.slow} in ${r.episodes} ` +
                `episodes ` +
                `${JSON.stringify(r.byCause)}; gc per 1,000 requests ` +
                `${JSON.stringify(gcPerThousand(r))}` +
                ` ${r.gcPauseMsPerS.toFixed(1)} ms/s max ${r.gcMaxMs.toFixed(1)}; ` +
                `CPU waits ms/s: service ${r.serviceWaitMsPerS.toFixed(0)}, h2load ${r.h2loadWaitMsPerS.toFixed(0)}` +
                `, mariadb ${r.mariadbWaitMsPerS.toFixed(0)}; ` +
                `RSS ${r.rssMib.toFixed(0)} MiB; load ${loadavg()[0]!.toFixed(2)}`,
            );
          }
    }
    const lines = [
      `${database.description}; load average ${load.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after; ` +
        `${rounds} rounds of ${duration} s (warm-up ${warmup} s); medians over the rounds`,
      "",
      "| variant | shape | scenario | req/s | p50 ms | p90 ms | p99 ms | p99/p50 | p99.9 ms " +
        "| slow episodes: GC / service CPU wait / h2load CPU wait / nothing seen | GC ms/s " +
        "| scavenges / mark-compacts per 1,000 requests | service CPU wait ms/s | h2load CPU wait ms/s " +
        "| peak RSS MiB |",
      "|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ];
    for (const v of services)
      for (const shape of values.shape!)
        for (const scenario of values.scenario!) {
          const rs = results.filter((r) => r.variant === v.name && r.shape === shape && r.scenario === scenario);
          const sum = (cause: string) => rs.reduce((s, r) => s + (r.byCause[cause] ?? 0), 0);
          const eps = rs.reduce((s, r) => s + r.episodes, 0);
          lines.push(
            `| ${v.name} | ${shape} | ${scenario} | ${median(rs.map((r) => r.rps)).toFixed(0)} | ` +
              `${median(rs.map((r) => r.p50)).toFixed(2)} ` +
              `| ${median(rs.map((r) => r.p90)).toFixed(2)} | ${median(rs.map((r) => r.p99)).toFixed(2)} | ` +
              `${median(rs.map((r) => r.p99 / r.p50)).toFixed(1)}x ` +
              `| ${median(rs.map((r) => r.p999)).toFixed(1)} | ${sum("gc")} / ${sum("service waited for a CPU")} / ` +
              `${sum("h2load waited for a CPU")} / ${sum("nothing seen")} of ${eps} ` +
              `| ${median(rs.map((r) => r.gcPauseMsPerS)).toFixed(1)} | ${perThousand(rs, "scavenge")} / ` +
              `${perThousand(rs, "mark-compact")} | ${median(rs.map((r) => r.serviceWaitMsPerS)).toFixed(0)} ` +
              `| ${median(rs.map((r) => r.h2loadWaitMsPerS)).toFixed(0)} | ` +
              `${Math.max(...rs.map((r) => r.rssMib)).toFixed(0)} |`,
          );
        }
    console.log(lines.join("\n"));
  } finally {
    for (const step of cleanup) await step().catch((e: unknown) => log(`cleanup: ${String(e)}`));
    rmSync(work, { recursive: true, force: true });
    if (groupNice !== undefined) writeFileSync("/proc/self/autogroup", groupNice);
  }
}

await main();
