import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { type KeyedReads, type PoolStats, WRITE_RETRY_CAUSES, type WriteRetries } from "../domain/records.js";

/** One finished request, as the metrics count it. */
export interface RequestSample {
  readonly protocol: string;
  /** A bounded name: an RPC, an endpoint path, or `unmatched`; never a raw client path. */
  readonly operation: string;
  /** The RPC code (`ok`, `not_found`) for RPC protocols, the HTTP status for REST and plain HTTP. */
  readonly code: string;
  readonly seconds: number;
}

/** The service's Prometheus metrics. */
export interface Metrics {
  /** Counts a finished request. */
  observe(sample: RequestSample): void;
  /** Counts a connection closed at once because MAX_CONNECTIONS were open. */
  connectionRefused(): void;
  /** Counts a liveness probe (issue 44): its outcome (`UP`, or the failure's kind) and how long it took. */
  probed(outcome: string, seconds: number): void;
  /** The text exposition of every metric. */
  render(): Promise<{ contentType: string; body: string }>;
}

/** Latency buckets in seconds: a registry read is milliseconds, a contended write can take seconds. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * What the metrics read of the body budget (src/surfaces/body-budget.ts): the bytes held now, the bodies refused
 * so far.
 */
export interface BodyBudgetStats {
  readonly used: number;
  readonly refused: number;
}

/** What the metrics read of the watch's replay budget (storage/byte-gate.ts, WATCH_REPLAY_MAX_BYTES). */
export interface ReplayBudgetStats {
  readonly used: number;
  readonly waiting: number;
  readonly refused: number;
}

/** What the metrics read when scraped, each part but the pool's optional (its metrics are then left out). */
export interface MetricsSources {
  poolStats: () => PoolStats;
  /** The repository's write transactions run again, by cause (read when scraped). */
  writeRetries?: () => WriteRetries;
  /** The repository's reads by id and by reference, and their statements (read when scraped). */
  keyedReads?: () => KeyedReads;
  bodyBudget?: BodyBudgetStats;
  watchReplay?: ReplayBudgetStats;
  /** The watches open now, and those refused before they were read whole (operations/watch-limits.ts). */
  watches?: { readonly open: number; readonly refusedEarly?: number };
  /** The scheduled versions by liveness state, read from the database when scraped (issue 44). */
  livenessStates?: () => Promise<Readonly<Record<string, number>>>;
}

/**
 * Request counters and latency by operation, the database pool's gauges (read
 * when scraped), and Node's default process metrics, in a registry of their
 * own so that several apps in one process (the tests) do not collide.
 */
export function createMetrics(sources: MetricsSources): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: "asor_requests_total",
    help:
      "Requests answered, by protocol, operation (RPC or endpoint) and code (RPC code, or HTTP status for REST " +
      "and plain HTTP).",
    labelNames: ["protocol", "operation", "code"] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: "asor_request_duration_seconds",
    help: "Time from a request's arrival to the end of its answer, by protocol and operation.",
    labelNames: ["protocol", "operation"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  registerPoolGauges(registry, sources.poolStats);
  const connectionsRefused = new Counter({
    name: "asor_connections_refused_total",
    help: "Connections closed as soon as they were accepted, because MAX_CONNECTIONS were open.",
    registers: [registry],
  });
  // In this order: the exposition lists the metrics in the order they were registered.
  if (sources.writeRetries !== undefined) registerWriteRetries(registry, sources.writeRetries);
  if (sources.keyedReads !== undefined) registerKeyedReads(registry, sources.keyedReads);
  if (sources.bodyBudget !== undefined) registerBodyBudget(registry, sources.bodyBudget);
  if (sources.watches !== undefined) registerWatches(registry, sources.watches);
  if (sources.watchReplay !== undefined) registerWatchReplay(registry, sources.watchReplay);
  const probes = registerProbes(registry, sources.livenessStates);

  return {
    observe({ protocol, operation, code, seconds }) {
      requests.inc({ protocol, operation, code });
      latency.observe({ protocol, operation }, seconds);
    },
    connectionRefused() {
      connectionsRefused.inc();
    },
    probed(outcome, seconds) {
      probes.count.inc({ outcome });
      probes.latency.observe(seconds);
    },
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}

/** A gauge set to `read()` when scraped. */
function readGauge(registry: Registry, name: string, help: string, read: () => number): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

/** A counter without labels set to `read()` when scraped: the count is kept by what it reads. */
function readCounter(registry: Registry, name: string, help: string, read: () => number): void {
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

/** The database pool's gauges, and the search gate's line. */
function registerPoolGauges(registry: Registry, poolStats: () => PoolStats): void {
  const gauge = (name: string, help: string, read: (stats: PoolStats) => number): void =>
    readGauge(registry, name, help, () => read(poolStats()));
  gauge("asor_db_pool_used_connections", "Database connections in use.", (s) => s.used);
  gauge("asor_db_pool_free_connections", "Open database connections idle in the pool.", (s) => s.free);
  gauge("asor_db_pool_pending_acquires", "Callers waiting for a database connection.", (s) => s.pendingAcquires);
  gauge("asor_db_pool_max_connections", "The most database connections the pool opens.", (s) => s.max);
  gauge(
    "asor_search_gate_waiting",
    "Costly searches waiting for a slot at the search gate (SEARCH_MAX_CONCURRENT, SEARCH_MAX_PER_TENANT).",
    (s) => s.searchesWaiting,
  );
}

function registerWriteRetries(registry: Registry, writeRetries: () => WriteRetries): void {
  new Counter({
    name: "asor_db_write_retries_total",
    help:
      "Write transactions run again, by cause: certification (a deadlock error at COMMIT: on Galera, another " +
      "node committed a row this write changed), deadlock (the same on a statement), lock_wait_timeout, " +
      "duplicate_key, busy (SQLite), node_failed (moved to the next database host before COMMIT) and " +
      "triggers_reloaded (a table's triggers failed to load on the node, which then reloaded them).",
    labelNames: ["cause"] as const,
    registers: [registry],
    collect() {
      const counts = writeRetries();
      this.reset();
      for (const cause of WRITE_RETRY_CAUSES) this.inc({ cause }, counts[cause]);
    },
  });
}

function registerKeyedReads(registry: Registry, keyedReads: () => KeyedReads): void {
  /** A counter by read (by_id, by_reference) of one of keyedReads' counts, read when scraped. */
  const byRead = (name: string, help: string, count: keyof KeyedReads["by_id"]): void =>
    void new Counter({
      name,
      help,
      labelNames: ["read"] as const,
      registers: [registry],
      collect() {
        const counts = keyedReads();
        this.reset();
        for (const read of ["by_id", "by_reference"] as const) this.inc({ read }, counts[read][count]);
      },
    });
  byRead(
    "asor_db_keyed_reads_total",
    "Reads of one definition by key: by_id (a GET by id) and by_reference (a GET by Agent_ID=).",
    "reads",
  );
  byRead(
    "asor_db_keyed_read_statements_total",
    "Statements sent for the reads of asor_db_keyed_reads_total: on MySQL the reads asked while one is in " +
      "flight go together, one statement per tenant, so reads per statement above 1 is the coalescing at work.",
    "statements",
  );
}

function registerBodyBudget(registry: Registry, bodyBudget: BodyBudgetStats): void {
  readGauge(
    registry,
    "asor_buffered_body_bytes",
    "Request body bytes held by requests now (reserved against MAX_BUFFERED_BODY_BYTES).",
    () => bodyBudget.used,
  );
  readCounter(
    registry,
    "asor_body_budget_refusals_total",
    "Request bodies refused with 503 OVERLOADED because they would have taken the process past " +
      "MAX_BUFFERED_BODY_BYTES.",
    () => bodyBudget.refused,
  );
}

function registerWatches(registry: Registry, watches: { readonly open: number; readonly refusedEarly?: number }): void {
  readGauge(
    registry,
    "asor_watches_open",
    "Watches open now, every surface together (held against WATCH_MAX_OPEN).",
    () => watches.open,
  );
  readCounter(
    registry,
    "asor_watches_refused_early_total",
    "REST watches over HTTP/1.1 refused from their first bytes, before authentication: their path and token " +
      "already held their caller's WATCH_MAX_PER_TOKEN (each is also in the aggregated refusal log line).",
    () => watches.refusedEarly ?? 0,
  );
}

function registerWatchReplay(registry: Registry, watchReplay: ReplayBudgetStats): void {
  readGauge(
    registry,
    "asor_watch_replay_bytes",
    "Bytes of definitions the watches starting from an older revision hold now, together (against " +
      "WATCH_REPLAY_MAX_BYTES): each holds its last read until its client has been written what it was handed.",
    () => watchReplay.used,
  );
  readGauge(
    registry,
    "asor_watch_replay_waiting",
    "Watches waiting for their share of WATCH_REPLAY_MAX_BYTES to read their next part of the change log.",
    () => watchReplay.waiting,
  );
  readCounter(
    registry,
    "asor_watch_replay_refusals_total",
    "Watches from an older revision refused (WATCH_REPLAY_BUSY) after WATCH_REPLAY_WAIT_MS without their " + "share.",
    () => watchReplay.refused,
  );
}

/** The prober's metrics (issue 44): probes by outcome, their latency, the versions by liveness state. */
function registerProbes(registry: Registry, livenessStates: MetricsSources["livenessStates"]) {
  const count = new Counter({
    name: "asor_probes_total",
    help: "Liveness probes of agents, by outcome: UP (a card was found) or the failure's kind (TIMEOUT, REFUSED...).",
    labelNames: ["outcome"] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: "asor_probe_duration_seconds",
    help: "How long a liveness probe took, redirects and body included.",
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  if (livenessStates !== undefined)
    new Gauge({
      name: "asor_agents_by_liveness",
      help: "Versions the prober schedules, by liveness state (UP, DOWN, NOT_PROBED), every process together.",
      labelNames: ["state"] as const,
      registers: [registry],
      async collect() {
        // A database that does not answer leaves the gauge empty, not the scrape failed.
        const states = await livenessStates().catch(() => ({}));
        this.reset();
        for (const [state, n] of Object.entries(states)) this.set({ state }, n);
      },
    });
  return { count, latency };
}
