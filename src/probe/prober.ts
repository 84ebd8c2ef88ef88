/**
 * The prober (issue 44): every ACTIVE version with a `url` is probed once per PROBE_INTERVAL_MS (±10 %) by all
 * the processes on one database together, through the schedule's leases (storage/probe-schedule.ts); what a
 * probe finds is judged (domain/liveness.ts) and, when it changes the version's `state` or `drift`, written as a
 * LIVENESS_CHANGED change. A probe that changes neither writes nothing a reader sees: only the schedule moves.
 *
 * A tick every tenth of the interval (at least 100 ms, at most 5 s) seeds the schedule with versions it lacks
 * (at most every half interval, each due at a random time of the next interval) and leases as many due versions
 * as the process has probes free (PROBE_CONCURRENCY), each host at most PROBE_CONCURRENCY_PER_HOST at once. A
 * lease lasts twice the probe's timeout and a second more: a process killed mid-probe leaves its versions to
 * another once it ends.
 */
import { randomBytes } from "node:crypto";
import { fromBinary } from "@bufbuild/protobuf";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { agentCardJson, renderAgentCard } from "../domain/agent-card.js";
import { notFound } from "../domain/errors.js";
import { judgeProbe, type LivenessNow, type ProbeVerdict } from "../domain/liveness.js";
import type { AgentDefinitionRepository, DueProbe, Finished, StoredDefinition } from "../storage/repository.js";
import type { ProbeAllowance } from "./address-guard.js";
import { fetchLiveCard, liveCardUrl, type ProbeLimits, type ProbeOutcome } from "./live-card-fetch.js";

/** The prober's settings (config.ts's `probe`, PROBE_*). */
export interface ProbeSettings {
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly maxBodyBytes: number;
  readonly maxRedirects: number;
  readonly concurrency: number;
  readonly concurrencyPerHost: number;
  readonly downAfter: number;
  readonly allow: ProbeAllowance;
}

export interface ProberOptions {
  readonly repository: AgentDefinitionRepository;
  readonly settings: ProbeSettings;
  /** The User-Agent of its requests (user-agent.ts's probeUserAgent). */
  readonly userAgent: string;
  /** Told of each probe: its outcome (`UP`, or the failure's kind) and how long it took. */
  readonly onProbe?: (outcome: string, latencyMs: number) => void;
  /** Told of a failed tick or probe; the prober goes on. */
  readonly onError?: (what: string, error: unknown) => void;
  /** Whether the schedule runs (PROBE_ENABLED); probeNow works either way. Default true. */
  readonly scheduled?: boolean;
}

export interface Prober {
  /** Probes version `id` of `tenant` now; answers it with its liveness after the probe. NOT_FOUND when absent. */
  probeNow(tenant: string, id: string): Promise<StoredDefinition>;
  /** Probes in flight now, and done since the start (tests, metrics). */
  stats(): { readonly inFlight: number; readonly done: number };
  /** Stops the schedule and aborts the probes in flight. */
  close(): Promise<void>;
}

/** How much an interval varies, either way: the versions seeded together spread out over the intervals. */
const JITTER = 0.1;
/** How many next times #finish keeps before it writes them, and how long it keeps the first. */
const FINISH_BATCH = 64;
const FINISH_WAIT_MS = 200;
/** The most versions one seeding adds. */
const SEED_LIMIT = 10_000;

export function createProber(options: ProberOptions): Prober {
  return new ScheduledProber(options);
}

class ScheduledProber implements Prober {
  readonly #options: ProberOptions;
  readonly #settings: ProbeSettings;
  readonly #limits: ProbeLimits;
  /** This process's name in the leases it takes. */
  readonly #owner = randomBytes(12).toString("hex");
  readonly #closing = new AbortController();
  readonly #tickMs: number;
  readonly #leaseMs: number;
  readonly #perHost = new Map<string, number>();
  readonly #waiting: (() => void)[] = [];
  /** The scheduled probes in flight, each until its next time is set. */
  readonly #inFlight = new Set<Promise<void>>();
  #done = 0;
  #seededAt = Number.NEGATIVE_INFINITY;
  /** The next times of probes that ended, to be written together (#finish), and the writes under way. */
  readonly #finished: Finished[] = [];
  #flushTimer: ReturnType<typeof setTimeout> | undefined;
  readonly #flushing = new Set<Promise<void>>();
  /** The lease under way (#pump), and whether the last one came back full: more versions are due. */
  #pumping: Promise<void> | undefined;
  #backlog = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #ticking: Promise<void> | undefined;

  constructor(options: ProberOptions) {
    this.#options = options;
    const settings = (this.#settings = options.settings);
    this.#limits = {
      timeoutMs: settings.timeoutMs,
      maxBodyBytes: settings.maxBodyBytes,
      maxRedirects: settings.maxRedirects,
      allowance: settings.allow,
      userAgent: options.userAgent,
    };
    this.#tickMs = Math.min(5_000, Math.max(100, Math.round(settings.intervalMs / 10)));
    this.#leaseMs = 2 * settings.timeoutMs + 1_000;
    if (options.scheduled !== false) this.#schedule(0);
  }

  stats() {
    return { inFlight: this.#inFlight.size, done: this.#done };
  }

  async probeNow(tenant: string, id: string): Promise<StoredDefinition> {
    const stored = await this.#options.repository.get(tenant, id);
    if (stored === undefined) throw notFound(`Agent definition "${id}"`, "id");
    const now = await this.#options.repository.probeSchedule().current(tenant, id);
    const after = await this.#probe({ tenant, id, now }, stored);
    return after ?? stored;
  }

  async close(): Promise<void> {
    this.#closing.abort();
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    await this.#ticking;
    // Aborted, they end at once; what they write (their next time) is written before the storage closes.
    await Promise.allSettled(this.#inFlight);
    await this.#pumping?.catch(() => undefined);
    await this.#flush();
    await Promise.allSettled(this.#flushing);
  }

  #schedule(delayMs: number): void {
    if (this.#closing.signal.aborted) return;
    this.#timer = setTimeout(() => {
      this.#ticking = this.#tick()
        .catch((error: unknown) => this.#options.onError?.("liveness probes' schedule", error))
        .finally(() => this.#schedule(this.#tickMs));
    }, delayMs);
    this.#timer.unref?.();
  }

  /** Seeds the schedule when it is time, then leases what the free probes can take and starts them. */
  async #tick(): Promise<void> {
    const schedule = this.#options.repository.probeSchedule();
    const now = new Date();
    if (now.getTime() - this.#seededAt >= this.#settings.intervalMs / 2) {
      // Due within the first interval, at random: a first start on 10,000 versions probes them at the steady rate.
      await schedule.seed(now, this.#settings.intervalMs, SEED_LIMIT);
      this.#seededAt = now.getTime();
    }
    await this.#pump();
  }

  /**
   * Leases as many due versions as there are free probes and starts them, again while a lease comes back full
   * (more are due): then each probe that ends starts the next lease once a quarter of the probes are free, so
   * the probes stay busy while versions are due, not only at each tick (16 probes a 5 s tick were 192 of 10,000
   * versions a minute). One lease at a time.
   */
  async #pump(): Promise<void> {
    if (this.#pumping !== undefined) return this.#pumping;
    this.#pumping = (async () => {
      const { concurrency } = this.#settings;
      for (;;) {
        const free = concurrency - this.#inFlight.size;
        if (free <= 0 || this.#closing.signal.aborted) return;
        if (this.#backlog && free < Math.ceil(concurrency / 4) && this.#inFlight.size > 0) return;
        const now = new Date();
        const schedule = this.#options.repository.probeSchedule();
        const due = await schedule.claim(this.#owner, free, now, new Date(now.getTime() + this.#leaseMs));
        for (const probe of due) this.#start(probe);
        this.#backlog = due.length === free;
        if (!this.#backlog) return;
      }
    })().finally(() => {
      this.#pumping = undefined;
    });
    return this.#pumping;
  }

  #start(probe: DueProbe): void {
    const running: Promise<void> = this.#scheduled(probe).finally(() => {
      this.#inFlight.delete(running);
      this.#done++;
      if (this.#backlog)
        this.#pump().catch((error: unknown) => this.#options.onError?.("liveness probes' lease", error));
    });
    this.#inFlight.add(running);
  }

  /** One leased version: probed when it is an ACTIVE version, its next time set whatever happened. */
  async #scheduled(due: DueProbe): Promise<void> {
    let failures = due.now.failures;
    try {
      const stored = await this.#options.repository.get(due.tenant, due.id);
      if (stored?.status === "ACTIVE")
        await this.#probe(due, stored, (verdict) => {
          failures = verdict.failures;
        });
    } catch (error) {
      this.#options.onError?.(`liveness probe of ${due.tenant}/${due.id}`, error);
    }
    this.#finish({ tenant: due.tenant, id: due.id, failures, dueAt: this.#nextDue() });
  }

  /**
   * Keeps a probe's next time for the next batch: written FINISH_BATCH at a time or FINISH_WAIT_MS after the first,
   * in one transaction (on SQLite one commit, whose sync held the event loop, for many probes, not one each:
   * 77 probes a second took GETs by id to 0.25x). Until then its lease keeps it from being taken again.
   */
  #finish(finished: Finished): void {
    this.#finished.push(finished);
    if (this.#finished.length >= FINISH_BATCH) void this.#flush();
    else this.#flushTimer ??= setTimeout(() => void this.#flush(), FINISH_WAIT_MS);
  }

  /** Writes the next times kept (#finish); a batch that fails is left to its leases' end. */
  async #flush(): Promise<void> {
    if (this.#flushTimer !== undefined) clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
    const batch = this.#finished.splice(0);
    if (batch.length === 0) return;
    const writing = this.#options.repository
      .probeSchedule()
      .finishAll(batch)
      .catch((error: unknown) => this.#options.onError?.(`liveness schedule of ${batch.length} versions`, error));
    this.#flushing.add(writing);
    await writing;
    this.#flushing.delete(writing);
  }

  #nextDue(): Date {
    const spread = 1 + JITTER * (2 * Math.random() - 1);
    return new Date(Date.now() + Math.round(this.#settings.intervalMs * spread));
  }

  /**
   * Probes `stored`'s agent and writes what changed; answers the version after a change, else undefined. With no
   * `judged` (an on-demand probe), the failures in a row go to the schedule here.
   */
  async #probe(
    due: DueProbe,
    stored: StoredDefinition,
    judged?: (verdict: ProbeVerdict) => void,
  ): Promise<StoredDefinition | undefined> {
    const { repository } = this.#options;
    const { downAfter } = this.#settings;
    const definition = fromBinary(AgentDefinitionSchema, stored.binary);
    if (definition.url === "") return undefined;
    const outcome = await this.#fetch(definition.url);
    const registered = agentCardJson(renderAgentCard(definition));
    const checkedAt = new Date();
    const judge = (now: LivenessNow) => judgeProbe(now, outcome, registered, downAfter, checkedAt);
    let verdict = judge(due.now);
    let after: StoredDefinition | undefined;
    // Judged again on the row as locked: another process's probe (on demand) may have changed it meanwhile.
    if (verdict.published !== undefined)
      after = await repository.write(due.tenant, (tx) =>
        tx.setLiveness(stored, (now) => {
          verdict = judge(now);
          return verdict.published;
        }),
      );
    if (judged !== undefined) judged(verdict);
    else await repository.probeSchedule().finish(due.tenant, due.id, verdict.failures, this.#nextDue());
    return after;
  }

  /** The live card, under the per-host limit; told to onProbe. */
  async #fetch(url: string): Promise<ProbeOutcome> {
    let host: string;
    try {
      host = liveCardUrl(url).host;
    } catch {
      host = "";
    }
    await this.#hostSlot(host);
    try {
      const outcome = await fetchLiveCard(url, this.#limits, this.#closing.signal);
      this.#options.onProbe?.(outcome.ok ? "UP" : outcome.kind, outcome.latencyMs);
      return outcome;
    } finally {
      this.#releaseHost(host);
    }
  }

  /** Waits until `host` has a free probe (PROBE_CONCURRENCY_PER_HOST), and takes it. */
  async #hostSlot(host: string): Promise<void> {
    while ((this.#perHost.get(host) ?? 0) >= this.#settings.concurrencyPerHost)
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    this.#perHost.set(host, (this.#perHost.get(host) ?? 0) + 1);
  }

  #releaseHost(host: string): void {
    const left = (this.#perHost.get(host) ?? 1) - 1;
    if (left === 0) this.#perHost.delete(host);
    else this.#perHost.set(host, left);
    // Every waiter looks again (each for its own host); the few that find room go on.
    for (const wake of this.#waiting.splice(0)) wake();
  }
}
