/** The command line of `npm run bench`. */
import { parseArgs } from "node:util";
import { parseWatchRuns, type WatchRun, type WatchWrites } from "./watch.js";

function watchWrites(value: string): WatchWrites {
  if (value !== "new" && value !== "existing") throw new Error(`--watch-writes: "${value}" is not new or existing`);
  return value;
}

export const USAGE = `usage: npm run bench -- [options]

  --sqlite              run the service (and the floor) on the embedded SQLite database instead of MariaDB
  --deno                run the service under Deno, as npm run start:deno does (its TypeScript sources;
                        node:sqlite with --sqlite); the floor server stays on node
  --smoke               a few seconds of load at one small size: exits 1 if any scenario errors (for CI)
  --sizes 1000,10000,100000   definitions in the tenant for each round of scenarios
  --surfaces-at 10000   the size at which REST, Connect and gRPC run side by side (default: the middle size)
  --duration 8          measured seconds per scenario
  --warmup 2            seconds of discarded load before each scenario
  --connections 10      requests in flight at once
  --only <regex>        run only the scenarios whose id matches (e.g. "service rest get")
  --mysql <url>         the MariaDB server (default mysql://root@127.0.0.1:3306); the bench makes and drops its own
                        database on it
  --database asor_bench the name of that database
  --out <dir>           also write results.json and results.md there
  --cpu-prof <dir>      run the service with --cpu-prof, writing its profile to <dir> on exit
  --service <dir>       run the service from another checkout, e.g. to measure a proposed change: its compiled entry
                        (package.json "main", after its npm run build), or, without a build script, its src/main/node.ts
                        under tsx; with --deno, what its own npm run start:deno runs (its scripts/deno.mjs)
  --keep                keep the database and the data dir after the run (for a look at query plans)
  --reuse               keep the MariaDB database if it exists (one kept with --keep) and top it up instead of starting
                        afresh
  --large-pages         issue 25's memory scenario instead: 40 definitions of ~750 KB, then 4 lists at once (limit 100,
                        paged through) on each protocol, one fresh service each; reports peak RSS and whether every
                        definition was reached
  --watch-replay        issue 50's replay scenario instead: 120 definitions of ~750 KB, then 8 watchers of each protocol
                        from since=0 (half reading nothing) on one service; reports peak RSS, /healthz p99 and what the
                        readers reached
  --search              the search scenarios instead (issue 11): first page, a page 500 tokens deep, a tag and a q
                        each matching 1 % of the tenant, over REST; default sizes 1000,1000000
  --fairness            the gate scenario instead (issue 25; MariaDB): one tenant saturating the search gate with a
                        keyword search matching all its definitions (the first size; default 20000) while another tenant
                        (1,000 definitions) runs its own, for --duration seconds (default 20); then 24 HTTP/2 searches
                        reset after their HEADERS and the statements left 2 s later
  --held-bodies         the held-bodies scenario instead (issue 25): --sockets connections each send 1,000,000 of a
                        declared 1,048,576-byte body with a valid token, then nothing, for --hold seconds; the
                        service's RSS is sampled throughout (target: idle + MAX_BUFFERED_BODY_BYTES + 64 MiB)
  --wire                issue 19's doors side by side instead: GET by id over REST, gRPC and Connect JSON (h2load: one
                        connection, --connections streams), POST of an existing key and of a new agent over REST and
                        gRPC (one node:http2 connection, bodies made beforehand), --rounds rounds of each in turn;
                        reports medians, p50/p99, peak RSS and the ratios against issue 19's targets (exit 1 when one is
                        missed)
  --cluster             issue 21's numbers instead (bench/cluster.ts): POST of a new agent and of an existing key
                        through 3 replicas on one MariaDB (--mysql), on the 3-node Galera test cluster
                        (npm run cluster; CLUSTER_PORT_OFFSET, CLUSTER_DIR) multi-primary, and single-writer
                        (DATABASE_WRITE_URL): writes/s, the ratio and the retries; then --rounds fail-overs
                        (kill -9 of node 1) with Galera's defaults, a 2 s evs.suspect_timeout, and single-writer
  --watch               issue 20's watch scenarios instead (bench/watch.ts): for each of --watch-runs, a fresh service,
                        its idle RSS, then <watchers> watches of the tenant (SSE or gRPC, from another process) and
                        the RSS with them connected, then new agents POSTed at <writes/s> for --duration seconds
                        (default 20): every write must reach every watcher; commit-to-delivery p50/p99 from each
                        write's acknowledgement and from its send (exit 1 when a limit of issue 20 is missed)
  --watch-runs sse:1000x20,sse:1000x200,grpc:1000x20,grpc:1000x200   the runs of --watch
  --watch-grpc-window <bytes>   the HTTP/2 flow-control window the gRPC watchers announce (grpc-js's
                        grpc-node.flow_control_window; default grpc-js's 64 KiB): a client that reads a heavy stream
                        sets a larger one (gRPC's C core and Go grow theirs by BDP probing)
  --watch-writes new    what each write of --watch is: new (a new agent) or existing (an update of one of the
                        100 warm-up keys, a new overview each time: no sequence to wait for)
  --rounds 3            rounds of --wire, fail-over rounds of --cluster
  --sockets 600         connections of --held-bodies
  --hold 20             seconds --held-bodies holds them
  --without-token       --held-bodies with a token that fails verification (the service answers 401 before reading)
  --soak <minutes>      the churn soak instead (issue 19; use with --deno): mixed REST and gRPC with connections opened,
                        closed mid-call (GOAWAY), abandoned and left idle, for <minutes>; reports whether the service
                        survived, its RSS, and the calls answered (bench/soak.ts)`;

export interface BenchOptions {
  readonly sqlite: boolean;
  /** Run the service under Deno (`npm run start:deno`'s command line) instead of node. */
  readonly deno: boolean;
  readonly smoke: boolean;
  readonly sizes: readonly number[];
  readonly surfacesAt: number;
  readonly durationSeconds: number;
  readonly warmupSeconds: number;
  readonly connections: number;
  readonly only: RegExp | undefined;
  readonly mysqlUrl: string;
  readonly database: string;
  readonly out: string | undefined;
  readonly cpuProf: string | undefined;
  readonly keep: boolean;
  readonly search: boolean;
  readonly largePages: boolean;
  readonly watchReplay: boolean;
  readonly reuse: boolean;
  /** The fairness scenario (bench/fairness.ts) instead of the others. */
  readonly fairness: boolean;
  /** The held-bodies scenario instead (see held-bodies.ts), with its sockets and hold time. */
  readonly heldBodies:
    | { readonly sockets: number; readonly holdSeconds: number; readonly withoutToken: boolean }
    | undefined;
  /** The churn soak (bench/soak.ts) instead of the others, for this many minutes. */
  readonly soakMinutes: number | undefined;
  /** Issue 21's cluster scenarios (bench/cluster.ts) instead, with their fail-over rounds. */
  readonly cluster: { readonly rounds: number } | undefined;
  /** The watch scenarios (bench/watch.ts) instead, with their runs. */
  readonly watch:
    | { readonly runs: readonly WatchRun[]; readonly grpcWindow: number | undefined; readonly writes: WatchWrites }
    | undefined;
  /** The wire scenarios (bench/wire.ts) instead, with their rounds. */
  readonly wire: { readonly rounds: number } | undefined;
  /** The checkout whose service is run (see serviceCommand in processes.ts); undefined: this one. */
  readonly serviceDir: string | undefined;
}

export function parseOptions(argv: readonly string[]): BenchOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      sqlite: { type: "boolean", default: false },
      wire: { type: "boolean", default: false },
      watch: { type: "boolean", default: false },
      "watch-runs": { type: "string", default: "sse:1000x20,sse:1000x200,grpc:1000x20,grpc:1000x200" },
      "watch-grpc-window": { type: "string" },
      "watch-writes": { type: "string", default: "new" },
      cluster: { type: "boolean", default: false },
      rounds: { type: "string" },
      deno: { type: "boolean", default: false },
      smoke: { type: "boolean", default: false },
      sizes: { type: "string" },
      "surfaces-at": { type: "string" },
      duration: { type: "string" },
      warmup: { type: "string" },
      connections: { type: "string" },
      only: { type: "string" },
      mysql: { type: "string", default: process.env.BENCH_MYSQL_URL ?? "mysql://root@127.0.0.1:3306" },
      database: { type: "string", default: "asor_bench" },
      out: { type: "string" },
      "cpu-prof": { type: "string" },
      keep: { type: "boolean", default: false },
      search: { type: "boolean", default: false },
      "large-pages": { type: "boolean", default: false },
      "watch-replay": { type: "boolean", default: false },
      reuse: { type: "boolean", default: false },
      fairness: { type: "boolean", default: false },
      service: { type: "string" },
      "held-bodies": { type: "boolean", default: false },
      soak: { type: "string" },
      sockets: { type: "string" },
      hold: { type: "string" },
      "without-token": { type: "boolean", default: false },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const number = (name: string, raw: string | undefined, fallback: number, min: number, max: number): number => {
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value < min || value > max)
      throw new Error(`--${name} must be a number from ${min} to ${max}, not "${raw}"\n\n${USAGE}`);
    return value;
  };
  const smoke = values.smoke;
  if (values.fairness && values.sqlite)
    throw new Error(`--fairness runs on MariaDB only (it reads the server's process list)\n\n${USAGE}`);
  const sizes = (
    values.sizes ?? (smoke ? "300" : values.search ? "1000,1000000" : values.fairness ? "20000" : "1000,10000,100000")
  )
    .split(",")
    .map((s) => number("sizes", s.trim(), 0, 1, 1_000_000));
  const middle = [...sizes].sort((a, b) => a - b)[Math.floor((sizes.length - 1) / 2)]!;
  return {
    sqlite: values.sqlite,
    deno: values.deno,
    smoke,
    sizes,
    surfacesAt: number("surfaces-at", values["surfaces-at"], middle, 1, 1_000_000),
    // The smoke run: 16 scenarios x 0.4 s = 6.4 s of load, no warm-up.
    durationSeconds: number(
      "duration",
      values.duration,
      smoke ? 0.4 : values.fairness || values.watch ? 20 : 8,
      0.1,
      120,
    ),
    warmupSeconds: number("warmup", values.warmup, smoke ? 0 : 2, 0, 60),
    connections: number("connections", values.connections, smoke ? 4 : 10, 1, 512),
    only: values.only === undefined ? undefined : new RegExp(values.only),
    mysqlUrl: values.mysql,
    database: values.database,
    out: values.out,
    cpuProf: values["cpu-prof"],
    keep: values.keep,
    search: values.search,
    largePages: values["large-pages"],
    watchReplay: values["watch-replay"],
    reuse: values.reuse,
    fairness: values.fairness,
    serviceDir: values.service,
    soakMinutes: values.soak === undefined ? undefined : number("soak", values.soak, 10, 0.1, 600),
    watch: values.watch
      ? {
          runs: parseWatchRuns(values["watch-runs"]),
          grpcWindow: values["watch-grpc-window"] === undefined ? undefined : Number(values["watch-grpc-window"]),
          writes: watchWrites(values["watch-writes"]),
        }
      : undefined,
    wire: values.wire ? { rounds: number("rounds", values.rounds, 3, 1, 50) } : undefined,
    cluster: values.cluster ? { rounds: number("rounds", values.rounds, 3, 1, 50) } : undefined,
    heldBodies: values["held-bodies"]
      ? {
          sockets: number("sockets", values.sockets, 600, 1, 5_000),
          holdSeconds: number("hold", values.hold, 20, 1, 600),
          withoutToken: values["without-token"],
        }
      : undefined,
  };
}
