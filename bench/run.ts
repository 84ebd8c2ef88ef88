/**
 * `npm run bench`: the benchmark of the registry. Makes its own database
 * (MariaDB `asor_bench`, or SQLite with --sqlite) and data dir, seeds a tenant
 * in rounds (1,000, 10,000, 100,000 definitions), starts the service and the
 * floor server as processes of their own, and drives each scenario from a
 * third process (load-worker.ts). Prints Markdown tables; exits 1 when the
 * service does not start, a seeded row does not read back, or any request of
 * any scenario fails. See BENCHMARKS.md for the method.
 */

import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, tmpdir, totalmem } from "node:os";
import { join, resolve } from "node:path";
import { parseAuthConfig } from "../src/auth/auth-config.js";
import { openLocalIssuer } from "../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../src/main/local-issuer-key-file.js";
import { agentReferenceId } from "../src/storage/rows.js";
import { createBenchDatabase, settleDatabase } from "./bench-database.js";
import { runClusterBench } from "./cluster.js";
import { type CountProbe, probeCountedTotal } from "./count-probe.js";
import { fairnessReport, runFairness } from "./fairness.js";
import { heldBodies, heldBodiesReport } from "./held-bodies.js";
import {
  LARGE_PAGE_PROTOCOLS,
  type LargePagesRow,
  largePagesOver,
  largePagesReport,
  seedLargeDefinitions,
} from "./large-pages.js";
import type { LoadJob } from "./load-job.js";
import { type Measurement, measure } from "./measure.js";
import { type BenchOptions, parseOptions } from "./options.js";
import { listenerPid, loadAverage, pidsNamed, untilIdle } from "./proc-stats.js";
import {
  denoServiceCommand,
  type ServerProcess,
  serviceCommand,
  startLoadProcess,
  startServer,
  tsxCommand,
} from "./processes.js";
import { markdownReport, type Row } from "./report.js";
import { operationOf, type Scenario, type SearchKind, scenariosAt } from "./scenarios.js";
import {
  ONE_PERCENT_SECOND_WORD,
  ONE_PERCENT_TAG,
  ONE_PERCENT_WORD,
  onePercentOf,
  openSeeder,
  type Seeder,
} from "./seed.js";
import { soak, soakReport } from "./soak.js";
import { runWatch, watchReport } from "./watch.js";
import { watchReplay, watchReplayReport } from "./watch-replay.js";
import { ensureH2load, runWire, wireReport } from "./wire.js";

const TENANT = "bench";
/** The bench tenant's agent sequence prefix: its agents are Agent_ID=BENCH-<number>. */
const SEQUENCE_PREFIX = "BENCH-";
const DOMAINS = ["Development", "Setup: Agents"];
const PAGE = 20;

const log = (message: string): void => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`);

async function main(options: BenchOptions): Promise<number> {
  const started = new Date();
  const loadBefore = loadAverage();
  const dataDir = await mkdtemp(join(tmpdir(), "asor-bench-"));
  const cleanup: (() => Promise<unknown>)[] = [];
  let failures = 0;
  try {
    // What production runs: the compiled entry (built first when stale), or, for a --service checkout from
    // before the build, its source under tsx. --deno: what the checkout's npm run start:deno runs (its sources).
    const serviceProcess = options.deno
      ? denoServiceCommand({ DATA_DIR: dataDir }, options.serviceDir)
      : serviceCommand(options.serviceDir);
    if (options.cluster !== undefined) {
      const issuer = await openLocalIssuer(localIssuerKeyFile(dataDir), parseAuthConfig({}).config);
      const report = await runClusterBench({
        service: serviceProcess,
        mysqlUrl: options.mysqlUrl,
        dataDir,
        authorization: async (tenant) =>
          `Bearer ${await issuer.issue({ tenant, domains: DOMAINS, ttlSeconds: 3 * 3600 })}`,
        durationSeconds: options.durationSeconds,
        warmupSeconds: options.warmupSeconds,
        writers: Math.max(1, Math.round(options.connections / 3)),
        rounds: options.cluster.rounds,
        log,
      });
      console.log(`Issue 21 on a cluster, service ${serviceProcess.cwd}\n\n${report}`);
      if (options.out !== undefined) {
        await mkdir(options.out, { recursive: true });
        await writeFile(join(options.out, "cluster.md"), report);
      }
      return 0;
    }
    log(`data dir ${dataDir}; preparing the ${options.sqlite ? "SQLite" : "MariaDB"} database`);
    const database = await createBenchDatabase({
      serverUrl: options.sqlite ? undefined : options.mysqlUrl,
      name: options.database,
      dataDir,
      tenant: TENANT,
      sequencePrefix: SEQUENCE_PREFIX,
      reuse: options.reuse,
    });
    if (!options.keep) cleanup.push(() => database.drop());
    const storageEnv: Record<string, string> = {
      DATA_DIR: dataDir,
      ...(database.databaseUrl === undefined ? {} : { DATABASE_URL: database.databaseUrl }),
    };

    // One token for every request, from the service's own local issuer (the key is made here, in the bench's data dir).
    const issuer = await openLocalIssuer(localIssuerKeyFile(dataDir), parseAuthConfig({}).config);
    const authorization = `Bearer ${await issuer.issue({ tenant: TENANT, domains: DOMAINS, ttlSeconds: 3 * 3600 })}`;

    // The service as configured by default (LOG_LEVEL info: a log line per request, written to a file here).
    const startService = (nodeArgs: readonly string[] = [], env: Record<string, string> = {}) =>
      startServer(
        "the service",
        serviceProcess,
        "agent definition registry listening",
        { ...storageEnv, PORT: "0", LOG_LEVEL: "info", ...env },
        dataDir,
        nodeArgs,
      );

    if (options.watchReplay) {
      const profile = options.cpuProf === undefined ? [] : ["--cpu-prof", "--cpu-prof-dir", resolve(options.cpuProf)];
      const service = await startService(profile);
      cleanup.unshift(() => service.stop());
      const result = await watchReplay(service, authorization, TENANT, log);
      console.log(watchReplayReport(result));
      return result.survived &&
        Object.values(result.reached)
          .flat()
          .every((n) => n === 120)
        ? 0
        : 1;
    }

    if (options.largePages) {
      const seeding = await startService();
      await seedLargeDefinitions(seeding, authorization, TENANT).finally(() => seeding.stop());
      const rows: LargePagesRow[] = [];
      for (const protocol of LARGE_PAGE_PROTOCOLS) {
        const row = await largePagesOver(protocol, startService, authorization, TENANT);
        log(
          `${protocol}: peak RSS ${row.peakRssMib.toFixed(0)} MiB, ${row.pages} pages, ` +
            `reached ${row.reached.join("/")}${row.survived ? "" : ", the service died"}`,
        );
        if (!row.survived || row.error !== undefined) failures++;
        rows.push(row);
      }
      console.log(largePagesReport(rows));
      return failures > 0 ? 1 : 0;
    }

    if (options.heldBodies !== undefined) {
      const service = await startService();
      cleanup.unshift(() => service.stop());
      const result = await heldBodies(service, options.heldBodies.withoutToken ? "Bearer not-a-token" : authorization, {
        ...options.heldBodies,
        log,
      });
      const budgetMib = Number(process.env.MAX_BUFFERED_BODY_BYTES ?? 16 * 1024 * 1024) / 2 ** 20;
      const { markdown, met } = heldBodiesReport(result, budgetMib);
      console.log(
        `Held bodies${options.heldBodies.withoutToken ? " without a valid token" : ""}, ${database.description}, ` +
          `service ${serviceProcess.cwd}, budget ${budgetMib} MiB\n\n${markdown}`,
      );
      if (service.stderr().trim() !== "") log(`the service's stderr:\n${service.stderr().slice(-4000)}`);
      return met ? 0 : 1;
    }

    if (options.soakMinutes !== undefined) {
      ensureH2load(log);
      const service = await startService();
      cleanup.unshift(() => service.stop());
      log(`soak: ${options.deno ? "Deno" : "node"} service pid ${service.pid}, ${options.soakMinutes} min`);
      const result = await soak(service, authorization, TENANT, { minutes: options.soakMinutes, dataDir, log });
      console.log(`${options.deno ? "Deno" : "node"}, ${database.description}\n\n${soakReport(result)}`);
      return result.survived ? 0 : 1;
    }

    /** `--cpu-prof <dir>`: the service's node flags that write its CPU profile there on exit. */
    const cpuProf = options.cpuProf === undefined ? [] : ["--cpu-prof", "--cpu-prof-dir", resolve(options.cpuProf)];
    if (options.watch !== undefined) {
      log(`watch: ${options.watch.runs.length} runs of ${options.durationSeconds} s of writes`);
      const results = await runWatch((env) => startService(cpuProf, env), authorization, TENANT, {
        runs: options.watch.runs,
        grpcWindow: options.watch.grpcWindow,
        writes: options.watch.writes,
        seconds: options.durationSeconds,
        databasePids: database.kind === "mariadb" ? pidsNamed(["mariadbd", "mysqld"]) : [],
        log,
      });
      const { markdown, met } = watchReport(results);
      const watchWritesText = options.watch.writes === "new" ? "new agents" : "updates of existing keys";
      console.log(
        `The watch (issue 20), ${database.description}, ${options.deno ? "Deno" : "Node"}, service ` +
          `${serviceProcess.cwd}, ${options.durationSeconds} s of writes (${watchWritesText}) per run, load before ` +
          `${loadBefore.toFixed(2)}\n\n${markdown}`,
      );
      return met ? 0 : 1;
    }

    const seeder = await openSeeder({ databaseUrl: database.databaseUrl, dataDir, tenant: TENANT });
    cleanup.unshift(() => seeder.close());

    if (options.wire !== undefined) {
      ensureH2load(log);
      await seeder.topUp(options.sizes[0] ?? 1000);
      const { ids, names } = await seeder.sample(1000);
      const service = await startService(cpuProf);
      cleanup.unshift(() => service.stop());
      const runs = await runWire(service, authorization, {
        tenant: TENANT,
        id: ids[0] as string,
        names,
        rounds: options.wire.rounds,
        durationSeconds: options.durationSeconds,
        warmupSeconds: options.warmupSeconds,
        streams: options.connections,
        only: options.only,
        log,
      });
      await seeder.removeCreated("Wire Agent");
      const { markdown, met } = wireReport(runs);
      console.log(
        `The doors side by side (issue 19), ${database.description}, ${options.deno ? "Deno" : "Node"}, ` +
          `service ${serviceProcess.cwd}, ${options.wire.rounds} rounds of ${options.durationSeconds} s, ` +
          `${options.connections} streams on one connection\n\n${markdown}`,
      );
      if (service.stderr().trim() !== "") log(`the service's stderr:\n${service.stderr().slice(-4000)}`);
      return met ? 0 : 1;
    }

    log(
      `the service: ${serviceProcess.executable ?? "node"} ${[...cpuProf, ...serviceProcess.args].join(" ")} ` +
        `(in ${serviceProcess.cwd})`,
    );
    const service = await startService(cpuProf);
    cleanup.unshift(() => service.stop());
    const floor = await startServer(
      "the floor server",
      tsxCommand("bench/floor-server.ts"),
      "floor listening",
      { ...storageEnv, PORT: "0" },
      dataDir,
    );
    cleanup.unshift(() => floor.stop());
    const load = startLoadProcess();
    cleanup.unshift(() => load.stop());
    // The database server's CPU is measured too: the one listening on the MariaDB port, else every mariadbd.
    const databaseServers = database.kind === "mariadb" ? pidsNamed(["mariadbd", "mysqld"]) : [];
    const listener = listenerPid(Number(new URL(options.mysqlUrl).port || 3306), databaseServers);
    const databasePids = listener === undefined ? databaseServers : [listener];
    log(
      `service pid ${service.pid} on ${service.baseUrl}; floor pid ${floor.pid} on ${floor.baseUrl}; ` +
        `load generator pid ${load.pid}; database pids ${databasePids.join(",") || "(embedded)"}`,
    );

    // Nothing of one scenario may run into the next: requests the server accepted before the load generator
    // stopped are still being served, and (MariaDB) their queries still run. SQLite has no process list: the
    // server going idle tells.
    const settle = async (pid: number): Promise<number> => {
      const killed = await settleDatabase(database, options.sqlite ? undefined : options.mysqlUrl, options.database);
      if (!(await untilIdle(pid)))
        log(
          `  ${pid === service.pid ? "the service" : "the floor server"} was still busy 15 s after the scenario ended`,
        );
      return killed;
    };

    if (options.fairness) {
      const size = options.sizes[0] ?? 20_000;
      const t0 = performance.now();
      await seeder.topUp(size);
      // The other tenant: a thousand definitions of its own.
      const other = { tenant: "bench-other", size: 1_000 };
      // Made through the service (a platform operator's token), so a --service checkout with other migrations
      // works too.
      const operator = `Bearer ${await issuer.issue({ domains: ["Setup: Tenants"], ttlSeconds: 600 })}`;
      const created = await fetch(`${service.baseUrl}/asor.v1.TenantAdminService/CreateTenant`, {
        method: "POST",
        headers: { authorization: operator, "content-type": "application/json" },
        body: JSON.stringify({ name: other.tenant, sequencePrefix: "OTHER-" }),
      });
      if (created.status !== 200 && created.status !== 409)
        throw new Error(`CreateTenant answered ${created.status}: ${await created.text()}`);
      const otherSeeder = await openSeeder({ databaseUrl: database.databaseUrl, dataDir, tenant: other.tenant });
      await otherSeeder.topUp(other.size);
      await otherSeeder.close();
      log(`fairness: seeded ${size} + ${other.size} definitions in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      const otherAuthorization =
        `Bearer ` + `${await issuer.issue({ tenant: other.tenant, domains: DOMAINS, ttlSeconds: 3 * 3600 })}`;
      const result = await runFairness({
        baseUrl: service.baseUrl,
        saturating: { path: `/api/asor/v1/${TENANT}/agentDefinition`, authorization },
        other: { path: `/api/asor/v1/${other.tenant}/agentDefinition`, authorization: otherAuthorization },
        durationSeconds: options.durationSeconds,
        mysqlUrl: options.mysqlUrl,
        database: options.database,
      });
      const report = fairnessReport(result, { saturating: size, other: other.size }, options.durationSeconds);
      console.log(report);
      if (options.out !== undefined) {
        await mkdir(options.out, { recursive: true });
        await writeFile(join(options.out, "fairness.md"), report);
      }
      return 0;
    }

    const rows: Row[] = [];
    const listTotals = new Map<number, number>();
    const countProbes = new Map<number, CountProbe>();
    const createPrefix = `Bench Create ${started.getTime().toString(36)}`;
    let jobNumber = 0;

    for (const size of options.sizes) {
      const t0 = performance.now();
      const added = await seeder.topUp(size);
      log(`size ${size}: seeded ${added} definitions in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      if (added > 0) await checkRoundTrip(service, authorization, seeder);
      const { ids, references, names } = await seeder.sample(1000);
      const scenarios = scenariosAt(size, options.surfacesAt, options.only, options.search);
      // Before the first round, every scenario runs once unmeasured: a scenario's own warm-up is too short to compile
      // every code path of a process that has served nothing yet, so the first scenarios would pay for it.
      const warmups = size === options.sizes[0] && options.warmupSeconds > 0 ? scenarios : [];
      for (const [index, scenario] of [...warmups, ...scenarios].entries()) {
        const warmingUp = index < warmups.length;
        const definitions = await seeder.count();
        const target = scenario.target === "service" ? service : floor;
        if (scenario.kind === "list-first" && scenario.target === "service" && !warmingUp)
          listTotals.set(size, await listTotal(service, authorization));
        const query = scenario.kind.startsWith("search-")
          ? await searchQuery(service, authorization, scenario.kind as SearchKind, definitions)
          : undefined;
        if (scenario.kind === "search-first" && !warmingUp) listTotals.set(size, definitions);
        const job: LoadJob = {
          surface: scenario.surface,
          operation: operationOf(scenario.kind),
          baseUrl: target.baseUrl,
          restPath:
            scenario.target === "service"
              ? `/api/asor/v1/${TENANT}/agentDefinition`
              : `/floor/${TENANT}/agentDefinition`,
          authorization,
          tenant: TENANT,
          connections: options.connections,
          warmupSeconds: warmingUp ? 0 : options.warmupSeconds,
          durationSeconds: warmingUp ? options.warmupSeconds : options.durationSeconds,
          // A GET by reference reads the same definitions through their agents' Agent_ID= references.
          ids: scenario.kind === "get-ref" ? references : ids,
          updateNames: names,
          createPrefix: `${createPrefix} ${jobNumber++}`,
          limit: PAGE,
          offset: scenario.kind === "list-deep" ? Math.max(0, definitions - PAGE) : 0,
          ...(query === undefined ? {} : { query }),
        };
        const measured = await measure(load, job, target.pid, databasePids);
        if (warmingUp) {
          await settle(target.pid);
          // The measured reads must see the round's size exactly.
          // The search scenarios create nothing (and the lookup by name prefix would take long at a million).
          if (index === warmups.length - 1 && !options.search) await seeder.removeCreated(createPrefix);
          continue;
        }
        // A scenario in which no request completes has failed too, even if none was refused.
        const measurement =
          measured.requests > 0
            ? measured
            : { ...measured, errors: 1, firstError: `no request completed in ${options.durationSeconds} s` };
        rows.push({ definitions, size, scenario, measurement });
        log(describe(scenario, definitions, measurement));
        const killed = await settle(target.pid);
        if (killed > 0) log(`  killed ${killed} queries of this scenario still running after it ended`);
        if (measurement.errors > 0) {
          failures++;
          log(`  ${measurement.errors} failed requests; the first: ${measurement.firstError ?? "?"}`);
          const stderr = target.stderr().trim();
          if (stderr !== "") log(`  ${target.name}'s stderr ends with:\n${stderr.slice(-2000)}`);
        }
      }
      if (options.search && scenarios.some((s) => s.kind === "search-q2")) {
        const query = await searchQuery(service, authorization, "search-q2", await seeder.count());
        const probe = await probeCountedTotal(
          { baseUrl: service.baseUrl, tenant: TENANT, authorization },
          query,
          await probeIds(service, authorization, query),
        );
        countProbes.set(size, probe);
        const ms = ({ p50, p99 }: { p50: number; p99: number }) => `p50 ${p50.toFixed(2)} / p99 ${p99.toFixed(2)} ms`;
        log(
          `size ${size}: ?${query} after a write elsewhere ${ms(probe.elsewhere)}, after a write to a match ` +
            `(counted) ${ms(probe.counted)}, again (kept) ${ms(probe.kept)} ` +
            `(${probe.rounds} rounds, one request at a time)`,
        );
      }
      const removed = options.search ? 0 : await seeder.removeCreated(createPrefix);
      if (removed > 0) log(`size ${size}: removed the ${removed} definitions the create scenarios made`);
    }
    if (rows.some((r) => r.scenario.target === "service") && service.stderr().trim() !== "")
      log(`the service's stderr:\n${service.stderr().slice(-4000)}`);

    const machine =
      `${cpus().length} × ${cpus()[0]?.model.trim() ?? "CPU"}, ` +
      `${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}`;
    const report = markdownReport(rows, options.sizes, options.surfacesAt, {
      database: database.description,
      machine,
      started: started.toISOString().slice(0, 16).replace("T", " "),
      options:
        `${options.connections} connections, ${options.warmupSeconds} s warm-up + ` +
        `${options.durationSeconds} s per scenario`,
      listTotals,
      loadBefore,
    });
    console.log(report);
    if (options.out !== undefined) {
      await mkdir(options.out, { recursive: true });
      await writeFile(join(options.out, "results.md"), report);
      await writeFile(
        join(options.out, "results.json"),
        JSON.stringify(
          {
            started,
            database: database.description,
            machine,
            options,
            rows,
            listTotals: [...listTotals],
            countProbes: [...countProbes],
          },
          null,
          2,
        ),
      );
    }
    log(
      `done in ${((Date.now() - started.getTime()) / 1000).toFixed(0)} s; load average now ${loadAverage().toFixed(2)}`,
    );
    if (failures > 0) log(`${failures} scenario(s) had failed requests`);
    return failures > 0 ? 1 : 0;
  } finally {
    for (const step of cleanup) await step().catch((error: unknown) => log(`cleanup: ${String(error)}`));
    if (!options.keep) await rm(dataDir, { recursive: true, force: true });
    else log(`kept ${dataDir} and the database ${options.database}`);
  }
}

function describe(scenario: Scenario, definitions: number, m: Measurement): string {
  const f = (value: number, digits = 0): string => (Number.isFinite(value) ? value.toFixed(digits) : "-");
  return (
    `${scenario.id.padEnd(26)} @${String(definitions).padStart(6)}: ${f(m.rps).padStart(5)} rps, p50 ` +
    `${f(m.p50, 2)} ms, p99 ${f(m.p99, 2)} ms, ` +
    `${m.errors} errors; CPU server ${f(m.serverCpu)}% db ${f(m.databaseCpu)}% client ${f(m.clientCpu)}% others ` +
    `${f(m.othersCpu)}%; peak RSS ${f(m.peakRssMib)} MiB`
  );
}

/** A seeded row read back through the service must be the document the service itself would have stored. */
async function checkRoundTrip(service: ServerProcess, authorization: string, seeder: Seeder): Promise<void> {
  const expected = seeder.expected();
  if (expected === undefined) return;
  const response = await fetch(`${service.baseUrl}/api/asor/v1/${TENANT}/agentDefinition/${expected.id}`, {
    headers: { authorization },
  });
  const body = await response.text();
  // The registry's `meta` (status, revision, timestamps) is spliced into answers from its own columns, never
  // stored in the document.
  const withoutMeta = (text: string): string => {
    try {
      const { meta: _meta, ...rest } = JSON.parse(text) as Record<string, unknown>;
      return JSON.stringify(rest);
    } catch {
      return text;
    }
  };
  if (response.status !== 200 || withoutMeta(body) !== JSON.stringify(expected.json)) {
    const got = withoutMeta(body);
    const want = JSON.stringify(expected.json);
    let at = 0;
    while (at < got.length && got[at] === want[at]) at++;
    throw new Error(
      `A seeded definition does not read back as written: GET ${expected.id} answered ${response.status}, ` +
        `differing at ${at}: ${got.slice(Math.max(0, at - 100), at + 200)} instead of ` +
        `${want.slice(Math.max(0, at - 100), at + 200)}`,
    );
  }
}

/**
 * How deep the search-deep scenario's page is: the page after this many pages, each reached by the previous
 * one's token.
 */
const DEEP_PAGES = 500;

/**
 * The query string of a search scenario, after checking that its `total` is exact: every
 * definition (the first page, the counters), or the 1 % the seeding marked (`tag`, `q`). For
 * search-deep, walks DEEP_PAGES pages by their tokens (fewer when the tenant ends sooner) and
 * answers the token of the next one.
 */
/**
 * A definition `query` matches (its first) and one it does not (the newest version of the first seeded agent,
 * which carries no 1 % marker: seed-rows.ts marks every hundredth), for the count probe.
 */
async function probeIds(
  service: ServerProcess,
  authorization: string,
  query: string,
): Promise<{ match: string; elsewhere: string }> {
  const read = async (path: string) => {
    const response = await fetch(`${service.baseUrl}/api/asor/v1/${TENANT}/agentDefinition${path}`, {
      headers: { authorization },
    });
    if (response.status !== 200) throw new Error(`GET ${path} answered ${response.status}: ${await response.text()}`);
    return response.json() as Promise<{ id?: string; data?: Array<{ id: string }> }>;
  };
  const match = (await read(`?${query}&limit=1`)).data?.[0]?.id;
  const elsewhere = (await read(`/${encodeURIComponent(agentReferenceId(SEQUENCE_PREFIX, 1))}`)).id;
  if (match === undefined || elsewhere === undefined) throw new Error("The count probe found no definitions to write.");
  return { match, elsewhere };
}

async function searchQuery(
  service: ServerProcess,
  authorization: string,
  kind: SearchKind,
  definitions: number,
): Promise<string> {
  const page = async (query: string) => {
    const response = await fetch(`${service.baseUrl}/api/asor/v1/${TENANT}/agentDefinition?limit=${PAGE}&${query}`, {
      headers: { authorization },
    });
    if (response.status !== 200)
      throw new Error(`GET list ?${query} answered ${response.status}: ${await response.text()}`);
    return (await response.json()) as { total: number; data: unknown[]; nextPageToken?: string };
  };
  const exact = async (query: string, expected: number): Promise<string> => {
    const { total } = await page(query);
    if (total !== expected)
      throw new Error(`GET list ?${query} answered total ${total}; the tenant holds ${expected} such definitions.`);
    return query;
  };
  switch (kind) {
    case "search-first":
      return exact("orderBy=createdAt", definitions);
    case "search-tag":
      return exact(`tag=${ONE_PERCENT_TAG}`, onePercentOf(definitions));
    case "search-q":
      return exact(`q=${ONE_PERCENT_WORD}`, onePercentOf(definitions));
    case "search-q2":
      return exact(`q=${ONE_PERCENT_WORD}%20${ONE_PERCENT_SECOND_WORD}`, onePercentOf(definitions));
    case "search-qprefix":
      return exact(`q=${ONE_PERCENT_WORD.slice(0, 4)}`, onePercentOf(definitions));
    case "search-qrel":
      return exact(`q=${ONE_PERCENT_WORD}&orderBy=relevance`, onePercentOf(definitions));
    case "search-deep": {
      let token: string | undefined;
      let depth = 0;
      for (let next = (await page("")).nextPageToken; next !== undefined && depth < DEEP_PAGES; depth++) {
        token = next;
        next = (await page(`pageToken=${token}`)).nextPageToken;
      }
      if (token === undefined) throw new Error("The list has one page only: no token to go deep with.");
      log(
        `  search-deep: the page ${depth} tokens deep (rows ${depth * PAGE + 1}-${(depth + 1) * PAGE} of ` +
          `${definitions})`,
      );
      return `pageToken=${token}`;
    }
  }
}

async function listTotal(service: ServerProcess, authorization: string): Promise<number> {
  const response = await fetch(`${service.baseUrl}/api/asor/v1/${TENANT}/agentDefinition?limit=1`, {
    headers: { authorization },
  });
  if (response.status !== 200) throw new Error(`GET list answered ${response.status}: ${await response.text()}`);
  return Number(((await response.json()) as { total: number }).total);
}

main(parseOptions(process.argv.slice(2))).then(
  (code) => process.exit(code),
  (error: unknown) => {
    // Driver errors carry their SQL, which for a seeding batch is megabytes long.
    log((error instanceof Error ? (error.stack ?? error.message) : String(error)).slice(0, 4000));
    process.exit(1);
  },
);
