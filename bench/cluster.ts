/**
 * Issue 21's numbers (`npm run bench -- --cluster`): writes through three replicas on the 3-node Galera
 * test cluster (scripts/cluster.mjs, started when not running) against three replicas on one MariaDB, and
 * the fail-over time.
 *
 * Throughput: for each setup (one MariaDB; the cluster multi-primary, each replica on its own node; the
 * cluster single-writer, DATABASE_WRITE_URL node 1 first on every replica), three services on a fresh
 * database, then POSTs of new agents and POSTs of existing keys (new content each time, keys in turn),
 * `writers` at a time per replica, from this process, for --duration seconds after --warmup. Reports the
 * writes answered 2xx per second, p50/p99, the other answers, and the writes the replicas ran again
 * (asor_db_write_retries_total, before and after) per write answered.
 *
 * Fail-over: three replicas, each its own node first, writing; `kill -9` of node 1; the time from the kill
 * to the first write acknowledged through the replica that was on node 1 (started after the kill), and
 * through the others; then node 1 is restarted. Rounds with Galera's defaults and with
 * `evs.suspect_timeout=PT2S; evs.inactive_timeout=PT4S` (set at runtime on every node, and back after).
 */
import { createConnection } from "mysql2/promise";
import * as cluster from "../scripts/cluster.mjs";
import { createBenchDatabase } from "./bench-database.js";
import { benchBody, benchBodyTemplate } from "./definition.js";
import { type ServerCommand, type ServerProcess, startServer } from "./processes.js";

export interface ClusterBenchOptions {
  readonly service: ServerCommand;
  /** The one MariaDB to compare with (mysql://root@127.0.0.1:3306). */
  readonly mysqlUrl: string;
  readonly dataDir: string;
  readonly authorization: (tenant: string) => Promise<string>;
  readonly durationSeconds: number;
  readonly warmupSeconds: number;
  /** Writers per replica. */
  readonly writers: number;
  /** Fail-over rounds per setting. */
  readonly rounds: number;
  readonly log: (message: string) => void;
}

interface WriteRow {
  readonly setup: string;
  readonly kind: "create" | "update";
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly others: Record<string, number>;
  readonly retries: Record<string, number>;
  readonly answered: number;
}

interface FailoverRow {
  readonly setting: string;
  /** Milliseconds from the kill to the first write acknowledged, per replica (the one on node 1 first). */
  readonly millis: readonly number[];
}

const TENANT = "bench";
const DATABASE = "asor_bench_cluster";
const SHORT_SUSPECT = "evs.suspect_timeout=PT2S;evs.inactive_timeout=PT4S";
const DEFAULT_SUSPECT = "evs.suspect_timeout=PT5S;evs.inactive_timeout=PT15S";

/** Runs the throughput setups and the fail-over rounds; resolves with the report (Markdown). */
export async function runClusterBench(options: ClusterBenchOptions): Promise<string> {
  const { log } = options;
  log("cluster: starting the 3-node test cluster (or reusing it)");
  await cluster.start();
  const authorization = await options.authorization(TENANT);
  const rows: WriteRow[] = [];
  const one = `${options.mysqlUrl.replace(/\/$/, "")}/`;
  const setups = [
    { setup: "one MariaDB", server: one, urls: () => [0, 1, 2].map(() => `${one}${DATABASE}`), writeUrl: undefined },
    { setup: "cluster, multi-primary", server: cluster.nodeUrl(1), urls: () => [1, 2, 3].map(allNodesFrom) },
    {
      setup: "cluster, single-writer",
      server: cluster.nodeUrl(1),
      urls: () => [1, 2, 3].map(allNodesFrom),
      writeUrl: allNodesFrom(1),
    },
  ];
  for (const { setup, server, urls, writeUrl } of setups) {
    const database = await createBenchDatabase({
      serverUrl: server,
      name: DATABASE,
      dataDir: options.dataDir,
      tenant: TENANT,
      sequencePrefix: "BENCH-",
    });
    const replicas = await startReplicas(options, urls(), writeUrl);
    try {
      log(`cluster: ${setup}: ${replicas.length} replicas up`);
      const keys = Array.from({ length: 300 }, (_, i) => `Bench Cluster Key ${i}`);
      await seed(replicas, authorization, keys);
      for (const kind of ["create", "update"] as const) {
        const before = await retriesOf(replicas);
        const result = await load(replicas, authorization, kind, {
          seconds: options.durationSeconds,
          warmup: options.warmupSeconds,
          writers: options.writers,
          names: keys,
        });
        const after = await retriesOf(replicas);
        const retries = Object.fromEntries(
          Object.entries(after).map(([cause, n]) => [cause, n - (before[cause] ?? 0)]),
        );
        rows.push({ setup, kind, ...result, retries });
        log(`cluster: ${setup}, ${kind}: ${result.perSecond.toFixed(0)}/s, retries ${JSON.stringify(retries)}`);
      }
    } finally {
      await Promise.all(replicas.map((r) => r.stop()));
      await database.drop();
    }
  }

  const failovers: FailoverRow[] = [];
  const database = await createBenchDatabase({
    serverUrl: cluster.nodeUrl(1),
    name: DATABASE,
    dataDir: options.dataDir,
    tenant: TENANT,
    sequencePrefix: "BENCH-",
  });
  try {
    for (const [setting, provider, writeUrl] of [
      ["Galera's defaults (evs.suspect_timeout 5 s)", DEFAULT_SUSPECT, undefined],
      ["evs.suspect_timeout=PT2S, evs.inactive_timeout=PT4S", SHORT_SUSPECT, undefined],
      ["defaults, single-writer (node 1 the writer)", DEFAULT_SUSPECT, allNodesFrom(1)],
    ] as const) {
      for (let round = 0; round < options.rounds; round++) {
        await cluster.start();
        await setProviderOptions(provider);
        const millis = await failoverRound(options, authorization, writeUrl);
        failovers.push({ setting, millis });
        log(`cluster: fail-over, ${setting}, round ${round + 1}: ${millis.join(", ")} ms`);
        await cluster.restart(1);
      }
    }
  } finally {
    await setProviderOptions(DEFAULT_SUSPECT).catch(() => undefined);
    await database.drop();
  }
  return clusterReport(rows, failovers, options);
}

/** DATABASE_URL of the bench's database with every node, node `first` first. */
function allNodesFrom(first: number): string {
  const order = [0, 1, 2].map((i) => ((first - 1 + i) % 3) + 1);
  const hosts = order.map((n) => `127.0.0.1:${cluster.nodePorts(n).sql}`);
  return `mysql://root@${hosts.join(",")}/${DATABASE}`;
}

async function startReplicas(
  options: ClusterBenchOptions,
  urls: readonly string[],
  writeUrl: string | undefined,
): Promise<ServerProcess[]> {
  const start = (url: string, i: number) =>
    startServer(
      `replica ${i}`,
      options.service,
      "agent definition registry listening",
      {
        DATA_DIR: options.dataDir,
        DATABASE_URL: url,
        ...(writeUrl === undefined ? {} : { DATABASE_WRITE_URL: writeUrl }),
        PORT: "0",
        // As configured by default (a line per request, into a file), as the other scenarios run it.
        LOG_LEVEL: "info",
      },
      options.dataDir,
    );
  // The database is migrated (createBenchDatabase): the three start at once.
  const started = await Promise.allSettled(urls.map(start));
  const up = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
  const failed = started.find((s) => s.status === "rejected");
  if (failed !== undefined) {
    await Promise.all(up.map((r) => r.stop()));
    throw failed.reason;
  }
  return up;
}

/** Sets wsrep_provider_options on every node that runs. */
async function setProviderOptions(value: string): Promise<void> {
  for (const n of cluster.NODES) {
    const connection = await createConnection({ uri: cluster.nodeUrl(n), connectTimeout: 3_000 });
    try {
      await connection.query("SET GLOBAL wsrep_provider_options = ?", [value]);
    } finally {
      await connection.end();
    }
  }
}

/** The replicas' asor_db_write_retries_total, summed, by cause. */
async function retriesOf(replicas: readonly ServerProcess[]): Promise<Record<string, number>> {
  const sum: Record<string, number> = {};
  for (const replica of replicas) {
    const text = await (await fetch(`${replica.baseUrl}/metrics`)).text();
    for (const [, cause, value] of text.matchAll(/^asor_db_write_retries_total\{cause="(\w+)"\} (\d+)$/gm))
      sum[cause!] = (sum[cause!] ?? 0) + Number(value);
  }
  return sum;
}

/** Creates the keys the updates rewrite, 10 at a time over the replicas. */
async function seed(replicas: readonly ServerProcess[], authorization: string, keys: readonly string[]) {
  const template = benchBodyTemplate();
  for (let i = 0; i < keys.length; i += 10) {
    await Promise.all(
      keys.slice(i, i + 10).map(async (key, j) => {
        const res = await fetch(`${replicas[j % replicas.length]!.baseUrl}/api/asor/v1/${TENANT}/agentDefinition`, {
          method: "POST",
          headers: { authorization, "content-type": "application/json" },
          body: benchBody(template, key),
        });
        await res.arrayBuffer();
        if (res.status !== 201) throw new Error(`seeding ${key}: ${res.status}`);
      }),
    );
  }
}

let edition = 0;
let created = 0;

/** POSTs through every replica, `writers` loops each, for warmup + seconds; measures the last `seconds`. */
async function load(
  replicas: readonly ServerProcess[],
  authorization: string,
  kind: "create" | "update",
  { seconds, warmup, writers, names }: { seconds: number; warmup: number; writers: number; names: readonly string[] },
): Promise<Omit<WriteRow, "setup" | "kind" | "retries">> {
  const template = benchBodyTemplate();
  const start = performance.now();
  const measureFrom = start + warmup * 1000;
  const end = measureFrom + seconds * 1000;
  const latencies: number[] = [];
  const others: Record<string, number> = {};
  let next = 0;
  const writer = async (replica: ServerProcess): Promise<void> => {
    while (performance.now() < end) {
      const body =
        kind === "create"
          ? benchBody(template, `Bench Cluster New ${created++}`)
          : benchBody(template, names[next++ % names.length]!, String(edition++));
      const began = performance.now();
      let status: string;
      try {
        const res = await fetch(`${replica.baseUrl}/api/asor/v1/${TENANT}/agentDefinition`, {
          method: "POST",
          headers: { authorization, "content-type": "application/json" },
          body,
        });
        await res.arrayBuffer();
        status = String(res.status);
      } catch {
        status = "dropped";
      }
      const done = performance.now();
      if (began < measureFrom || done > end) continue;
      if (status === "200" || status === "201") latencies.push(done - began);
      else others[status] = (others[status] ?? 0) + 1;
    }
  };
  await Promise.all(replicas.flatMap((replica) => Array.from({ length: writers }, () => writer(replica))));
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return { perSecond: latencies.length / seconds, p50: at(0.5), p99: at(0.99), others, answered: latencies.length };
}

/** One fail-over: replicas each on its own node first, 4 writers each; kill -9 of node 1. */
async function failoverRound(
  options: ClusterBenchOptions,
  authorization: string,
  writeUrl: string | undefined,
): Promise<number[]> {
  const replicas = await startReplicas(options, [1, 2, 3].map(allNodesFrom), writeUrl);
  const template = benchBodyTemplate();
  let stopped = false;
  let killedAt = Number.POSITIVE_INFINITY;
  const firstAfterKill = replicas.map(() => Number.POSITIVE_INFINITY);
  const writer = async (i: number): Promise<void> => {
    while (!stopped) {
      const began = Date.now();
      let ok = false;
      try {
        const res = await fetch(`${replicas[i]!.baseUrl}/api/asor/v1/${TENANT}/agentDefinition`, {
          method: "POST",
          headers: { authorization, "content-type": "application/json" },
          body: benchBody(template, `Bench Failover ${created++}`),
        });
        await res.arrayBuffer();
        ok = res.status === 201;
      } catch {
        ok = false;
      }
      const done = Date.now();
      if (ok && began >= killedAt) firstAfterKill[i] = Math.min(firstAfterKill[i]!, done - killedAt);
      if (!ok) await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  const running = replicas.flatMap((_, i) => Array.from({ length: 4 }, () => writer(i)));
  try {
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await cluster.kill(1);
    killedAt = Date.now();
    const deadline = killedAt + 60_000;
    while (firstAfterKill.some((t) => t === Number.POSITIVE_INFINITY) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 100));
  } finally {
    stopped = true;
    await Promise.all(running);
    await Promise.all(replicas.map((r) => r.stop()));
  }
  return firstAfterKill;
}

function clusterReport(rows: readonly WriteRow[], failovers: readonly FailoverRow[], options: ClusterBenchOptions) {
  const single = (kind: string) => rows.find((r) => r.setup === "one MariaDB" && r.kind === kind)?.perSecond ?? 0;
  const lines = [
    `Writes through 3 replicas, ${options.writers} writers each (${3 * options.writers} in flight), ` +
      `${options.durationSeconds} s after ${options.warmupSeconds} s of warm-up`,
    "",
    "| setup | POST | writes/s | vs one MariaDB | p50 ms | p99 ms | other answers | retries per write (by cause) |",
    "|---|---|---:|---:|---:|---:|---|---|",
  ];
  for (const r of rows) {
    const retries = Object.values(r.retries).reduce((a, b) => a + b, 0);
    const causes = Object.entries(r.retries)
      .filter(([, n]) => n > 0)
      .map(([cause, n]) => `${cause} ${n}`)
      .join(", ");
    const others = Object.entries(r.others)
      .map(([status, n]) => `${n} x ${status}`)
      .join(", ");
    lines.push(
      `| ${r.setup} | ${r.kind === "create" ? "new agent" : "existing key"} | ${r.perSecond.toFixed(0)} | ` +
        `${(r.perSecond / single(r.kind)).toFixed(2)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ` +
        `${others || "none"} | ${(retries / Math.max(1, r.answered)).toFixed(2)}${causes ? ` (${causes})` : ""} |`,
    );
  }
  lines.push("", "Fail-over: `kill -9` of node 1 to the first write acknowledged, per replica (ms)", "");
  lines.push("| setting | replica on node 1 | replica on node 2 | replica on node 3 |", "|---|---:|---:|---:|");
  for (const f of failovers) lines.push(`| ${f.setting} | ${f.millis.map((m) => m.toFixed(0)).join(" | ")} |`);
  return lines.join("\n");
}
