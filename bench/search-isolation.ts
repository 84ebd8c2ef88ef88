/**
 * Issue 25, item 2: costly searches on the embedded SQLite database must not hold up the rest of the process.
 * Seeds `--size` definitions in the tenant `bench` (bench/seed.ts), posts one definition in the tenant
 * `default`, then runs `--clients` loops of the costliest list shape (a `q` that every seeded definition
 * matches, ordered by name: the full-text matches are all read, counted and sorted) for `--duration` seconds,
 * while one sampler after the other asks `/healthz` and GETs the other tenant's definition by id. Prints the
 * samplers' p50/p99/max and the searches' outcomes.
 *
 *   node --import tsx bench/search-isolation.ts [--size 80000] [--clients 8] [--duration 20] [--service
 * <checkout>] [--workers n]
 *
 * `--workers` sets SEARCH_SQLITE_WORKERS; `--service` runs another checkout's service (bench/processes.ts
 * serviceCommand), e.g. main for "before".
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { parseAuthConfig } from "../src/auth/auth-config.js";
import { openLocalIssuer } from "../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../src/main/local-issuer-key-file.js";
import { createBenchDatabase } from "./bench-database.js";
import { benchDefinition } from "./definition.js";
import { serviceCommand, startServer } from "./processes.js";
import { openSeeder, SEEDED_NAME_PREFIX } from "./seed.js";

const { values } = parseArgs({
  options: {
    size: { type: "string", default: "80000" },
    clients: { type: "string", default: "8" },
    duration: { type: "string", default: "20" },
    service: { type: "string" },
    workers: { type: "string" },
  },
});
const size = Number(values.size);
const clients = Number(values.clients);
const durationMs = Number(values.duration) * 1000;
const DOMAINS = ["Development", "Setup: Agents"];
const log = (line: string) => console.error(`[search-isolation] ${line}`);

const dataDir = await mkdtemp(join(tmpdir(), "asor-bench-isolation-"));
try {
  const database = await createBenchDatabase({
    serverUrl: undefined,
    name: "unused",
    dataDir,
    tenant: "bench",
    sequencePrefix: "BENCH-",
    reuse: false,
  });
  const seeder = await openSeeder({ databaseUrl: undefined, dataDir, tenant: "bench" });
  const t0 = performance.now();
  await seeder.topUp(size);
  await seeder.close();
  log(`seeded ${size} definitions in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const issuer = await openLocalIssuer(localIssuerKeyFile(dataDir), parseAuthConfig({}).config);
  const bench = `Bearer ${await issuer.issue({ tenant: "bench", domains: DOMAINS, ttlSeconds: 3600 })}`;
  const other = `Bearer ${await issuer.issue({ tenant: "default", domains: DOMAINS, ttlSeconds: 3600 })}`;
  const service = await startServer(
    "the service",
    serviceCommand(values.service),
    "agent definition registry listening",
    {
      DATA_DIR: dataDir,
      PORT: "0",
      LOG_LEVEL: "info",
      ...(values.workers === undefined ? {} : { SEARCH_SQLITE_WORKERS: values.workers }),
    },
    dataDir,
  );
  try {
    const posted = await fetch(`${service.baseUrl}/api/asor/v1/default/agentDefinition`, {
      method: "POST",
      headers: { authorization: other, "content-type": "application/json" },
      body: JSON.stringify(benchDefinition("Other Tenant Agent")),
    });
    if (posted.status !== 201)
      throw new Error(`POST in the other tenant answered ${posted.status}: ${await posted.text()}`);
    const { id } = (await posted.json()) as { id: string };
    // Every seeded name starts with the prefix's first word: the costliest q matches them all.
    const word = SEEDED_NAME_PREFIX.split(" ")[0]?.toLowerCase();
    const searchUrl = `${service.baseUrl}/api/asor/v1/bench/agentDefinition?q=${word}&orderBy=name&limit=20`;
    const probe = await fetch(searchUrl, { headers: { authorization: bench } });
    log(`the search answers ${probe.status}, total ${((await probe.json()) as { total?: number }).total}`);

    const until = performance.now() + durationMs;
    const outcomes = new Map<number, number>();
    const searches = Array.from({ length: clients }, async () => {
      while (performance.now() < until) {
        const response = await fetch(searchUrl, { headers: { authorization: bench } });
        await response.arrayBuffer();
        outcomes.set(response.status, (outcomes.get(response.status) ?? 0) + 1);
      }
    });
    const sample = async (url: string, headers: Record<string, string>): Promise<number[]> => {
      const millis: number[] = [];
      while (performance.now() < until) {
        const started = performance.now();
        const response = await fetch(url, { headers });
        await response.arrayBuffer();
        if (response.status !== 200) throw new Error(`${url} answered ${response.status}`);
        millis.push(performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return millis;
    };
    const [healthz, get] = await Promise.all([
      sample(`${service.baseUrl}/healthz`, {}),
      sample(`${service.baseUrl}/api/asor/v1/default/agentDefinition/${id}`, { authorization: other }),
      ...searches,
    ]);
    const stats = (millis: number[] = []) => {
      const sorted = [...millis].sort((a, b) => a - b);
      const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]?.toFixed(1);
      return `n ${sorted.length}, p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${sorted.at(-1)?.toFixed(1)} ms`;
    };
    console.log(
      `size ${size}, ${clients} clients looping GET ?q=${word}&orderBy=name for ${durationMs / 1000} s ` +
        `(${values.service ?? "this checkout"})`,
    );
    console.log(`  /healthz:                   ${stats(healthz)}`);
    console.log(`  other tenant's GET by id:   ${stats(get)}`);
    console.log(`  searches answered:          ${[...outcomes].map(([status, n]) => `${n} x ${status}`).join(", ")}`);
  } finally {
    await service.stop();
    await database.drop();
  }
} finally {
  await rm(dataDir, { recursive: true, force: true });
}
