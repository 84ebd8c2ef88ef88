/**
 * Issue 50's third scenario: four tenants writing ~1 MB definitions in a loop beside another tenant's reads. The
 * service runs as `npm start` runs it (the compiled entry, its heap bounds) on a fresh database (SQLite, or
 * MariaDB with --mysql). Each writer POSTs a new agent after another, each ~1 MB of skills' descriptions whose
 * words are 15,000 distinct ones (within MAX_TERMS_PER_DEFINITION's default), shifted at every write; another
 * tenant GETs one of its definitions 20 times a second, and /healthz is asked 10 times a second, for `seconds`.
 * Reported: the writes and their answers, the GET's and /healthz's p50, p99 and max, failed requests, the
 * service's peak RSS, and whether it lived. Limits (issue 50): GET p99 ≤ 200 ms, /healthz p99 ≤ 100 ms.
 *
 *   node --import tsx bench/large-writes.ts [seconds] [--mysql] [--node-flags...] [KEY=VALUE settings...]
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAuthConfig } from "../src/auth/auth-config.js";
import { openLocalIssuer } from "../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../src/main/local-issuer-key-file.js";
import { createBenchDatabase } from "./bench-database.js";
import { percentile } from "./percentile.js";
import { peakRssKib, resetPeakRss } from "./proc-stats.js";
import { serviceCommand, startServer } from "./processes.js";

const args = process.argv.slice(2);
const seconds = Number(args.find((a) => /^\d+$/.test(a)) ?? 30);
const mysql = args.includes("--mysql");
const settings = Object.fromEntries(
  args.filter((a) => a.includes("=")).map((kv) => kv.split("=", 2) as [string, string]),
);
/** Flags for the service's node (e.g. --cpu-prof, --cpu-prof-dir=<dir>). */
const nodeArgs = args.filter((a) => a.startsWith("--") && a !== "--mysql");
const WRITERS = 4;
const VOCABULARY = 15_000;
const DOMAINS = ["Development", "Setup: Agents", "Setup: Tenants"];

const dataDir = await mkdtemp(join(tmpdir(), "large-writes-"));
const database = await createBenchDatabase({
  serverUrl: mysql ? (process.env.BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306") : undefined,
  name: "asor_bench_writes",
  dataDir,
  tenant: "reader",
  sequencePrefix: "R-",
});
const issuer = await openLocalIssuer(localIssuerKeyFile(dataDir), parseAuthConfig({}).config);
const bearer = async (tenant: string, platformAdmin = false) =>
  `Bearer ${await issuer.issue({ tenant, domains: DOMAINS, platformAdmin, ttlSeconds: 3600 })}`;
const service = await startServer(
  "the service",
  serviceCommand(process.env.SERVICE_DIR),
  "agent definition registry listening",
  {
    DATA_DIR: dataDir,
    PORT: "0",
    LOG_LEVEL: "info",
    ...(database.databaseUrl === undefined ? {} : { DATABASE_URL: database.databaseUrl }),
    ...settings,
  },
  dataDir,
  nodeArgs,
);

/** One request: its status and milliseconds, or its error (status 0). */
async function call(method: string, path: string, authorization?: string, body?: string) {
  const start = performance.now();
  try {
    const res = await fetch(`${service.baseUrl}${path}`, {
      method,
      headers: {
        ...(authorization === undefined ? {} : { authorization }),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body,
      signal: AbortSignal.timeout(60_000),
    });
    const text = await res.text();
    return { status: res.status, ms: performance.now() - start, text };
  } catch (err) {
    return { status: 0, ms: performance.now() - start, text: String(err) };
  }
}

/** ~1 MB: 100 skills of 10,000 characters, words of the writer's vocabulary from `shift` on. */
function largeBody(writer: number, n: number): string {
  const words = (i: number) => `w${writer}x${((i + n * 97) % VOCABULARY).toString(36).padStart(6, "0")}`;
  let next = 0;
  const skills = Array.from({ length: 100 }, (_, s) => {
    const parts: string[] = [];
    let length = 0;
    while (length < 9_980) {
      const word = words(next++);
      parts.push(word);
      length += word.length + 1;
    }
    return { id: `s${s}`, name: `Skill ${s}`, description: parts.join(" ") };
  });
  return JSON.stringify({
    name: `Large ${writer}-${n}`,
    description: "Written in a loop.",
    url: "https://agents.example.com/large",
    version: "1.0.0",
    provider: { id: "Provider=Bench" },
    skills,
  });
}

const summary = (values: number[]) =>
  `p50 ${percentile([...values], 50).toFixed(1)} / p99 ${percentile([...values], 99).toFixed(1)} / max ` +
  `${Math.max(...values).toFixed(0)} ms (${values.length})`;

try {
  const admin = await bearer("reader", true);
  for (let w = 0; w < WRITERS; w++) {
    const tenant = JSON.stringify({ name: `writer${w}`, sequencePrefix: `W${w}-` });
    const made = await call("POST", "/asor/v1/admin/tenants", admin, tenant);
    if (made.status !== 201) throw new Error(`tenant writer${w}: ${made.status} ${made.text}`);
  }
  const reader = await bearer("reader");
  const seeded = await call(
    "POST",
    "/api/asor/v1/reader/agentDefinition",
    reader,
    JSON.stringify({
      name: "Read Me",
      description: "Read while others write.",
      url: "https://agents.example.com/read",
      version: "1.0.0",
      provider: { id: "Provider=Bench" },
      skills: [{ id: "s", name: "S", description: "Reads." }],
    }),
  );
  if (seeded.status !== 201) throw new Error(`the reader's definition: ${seeded.status} ${seeded.text}`);
  const id = (JSON.parse(seeded.text) as { id: string }).id;
  const bodies = Array.from({ length: WRITERS }, (_, w) => largeBody(w, 0));
  console.error(`body of ${(bodies[0]!.length / 1e6).toFixed(2)} MB; ${WRITERS} writers for ${seconds} s`);
  resetPeakRss(service.pid);
  const until = performance.now() + seconds * 1000;
  const writes: Record<string, number> = {};
  const writeMs: number[] = [];
  const writers = Array.from({ length: WRITERS }, async (_, w) => {
    const authorization = await bearer(`writer${w}`);
    for (let n = 0; performance.now() < until; n++) {
      const res = await call("POST", `/api/asor/v1/writer${w}/agentDefinition`, authorization, largeBody(w, n));
      writes[res.status] = (writes[res.status] ?? 0) + 1;
      if (res.status === 201) writeMs.push(res.ms);
      else if (writes[res.status] === 1) console.error(`writer ${w}: ${res.status} ${res.text.slice(0, 200)}`);
    }
  });
  const every = async (ms: number, ask: () => Promise<{ status: number; ms: number }>, into: number[]) => {
    let failed = 0;
    while (performance.now() < until) {
      const next = performance.now() + ms;
      const res = await ask();
      into.push(res.ms);
      if (res.status !== 200) failed++;
      await new Promise((r) => setTimeout(r, Math.max(0, next - performance.now())));
    }
    return failed;
  };
  const gets: number[] = [];
  const probes: number[] = [];
  const [getFailed, probeFailed] = await Promise.all([
    every(50, () => call("GET", `/api/asor/v1/reader/agentDefinition/${id}`, reader), gets),
    every(100, () => call("GET", "/healthz"), probes),
    ...writers,
  ]);
  const alive = (await call("GET", "/healthz")).status === 200;
  console.log(
    [
      `${database.description}, ${WRITERS} writers of ~1 MB for ${seconds} s, service peak RSS ` +
        `${(peakRssKib(service.pid) / 1024).toFixed(0)} MiB, alive: ${alive ? "yes" : "NO"}`,
      `writes: ${JSON.stringify(writes)}, 201s ${writeMs.length ? summary(writeMs) : "none"}`,
      `other tenant's GET: ${summary(gets)}, failed ${getFailed}`,
      `/healthz: ${summary(probes)}, failed ${probeFailed}`,
    ].join("\n"),
  );
} finally {
  await service.stop();
  await database.drop();
  await rm(dataDir, { recursive: true, force: true });
}
