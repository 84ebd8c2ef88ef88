/**
 * `npm run bench -- --watch-replay` (issue 50, item 1): 120 definitions of ~750 KB in one tenant, then 8 watchers
 * of each protocol (SSE, Connect JSON, gRPC-Web, gRPC) from `since=0`: 4 of each read every event (resuming from
 * the last revision they had when refused or closed, after the Retry-After second), 4 read nothing. /healthz is
 * asked every 100 ms throughout. One fresh service (production flags) for the whole run, so that its peak RSS
 * (VmHWM, reset once the definitions are in) is the watchers' alone. Prints what the readers reached, the
 * refusals and closings they met, /healthz p50/p99/max and whether the process survived.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import {
  AgentDefinitionEvent_EventType,
  AgentDefinitionService,
  WatchAgentDefinitionsRequestSchema,
} from "../gen/asor/v1/agent_definition_service_pb.js";
import { silentWatcher } from "../test/support/silent-watchers.js";
import { seedLargeDefinitions } from "./large-pages.js";
import { percentile } from "./percentile.js";
import { peakRssKib, resetPeakRss } from "./proc-stats.js";
import type { ServerProcess } from "./processes.js";
import { SseIds } from "./sse-ids.js";

const DEFINITIONS = 120;
const PER_PROTOCOL = 8;
const PROTOCOLS = ["sse", "connect-json", "grpc-web", "grpc"] as const;
type Protocol = (typeof PROTOCOLS)[number];
/** A reader that has not reached every event by then has failed. */
const DEADLINE_MS = 300_000;

export interface WatchReplayResult {
  readonly peakRssMib: number;
  /** Per protocol: the events each reader reached (DEFINITIONS when all is well). */
  readonly reached: Record<Protocol, number[]>;
  /** Refusals (busy) and closings (too slow) the readers met and resumed after. */
  readonly refused: number;
  readonly closed: number;
  readonly healthz: { readonly p50: number; readonly p99: number; readonly max: number; readonly failed: number };
  readonly seconds: number;
  readonly survived: boolean;
}

/** Counts of what the readers met. */
interface Met {
  refused: number;
  closed: number;
}

/** An SSE reader from `since`: the revisions of its events; ends at `until` events or an error event/status. */
async function sseRead(service: ServerProcess, authorization: string, since: bigint, revisions: bigint[], met: Met) {
  const res = await fetch(`${service.baseUrl}/asor/v1/agentDefinitionEvents?since=${since}`, {
    headers: { authorization, accept: "text/event-stream" },
  });
  if (res.status === 503) {
    met.refused++;
    await res.body?.cancel();
    return;
  }
  if (res.status !== 200) throw new Error(`SSE watch answered ${res.status}`);
  let failed = false;
  const ids = new SseIds(
    (revision) => revisions.push(BigInt(revision)),
    () => {
      failed = true;
    },
  );
  const reader = res.body!.getReader();
  while (revisions.length < DEFINITIONS && !failed) {
    const { done, value } = await reader.read();
    if (done) break;
    ids.feed(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
  }
  await reader.cancel();
  if (failed) met.closed++;
}

/** An RPC reader from `since` over `protocol`; refusals and closings counted in `met`. */
async function rpcRead(
  service: ServerProcess,
  authorization: string,
  protocol: Exclude<Protocol, "sse">,
  since: bigint,
  revisions: bigint[],
  met: Met,
) {
  const options = { baseUrl: service.baseUrl };
  const transport =
    protocol === "grpc"
      ? createGrpcTransport(options)
      : protocol === "grpc-web"
        ? createGrpcWebTransport({ ...options, httpVersion: "1.1" })
        : createConnectTransport({ ...options, httpVersion: "1.1" });
  const client = createClient(AgentDefinitionService, transport);
  const abort = new AbortController();
  try {
    for await (const event of client.watchAgentDefinitions(create(WatchAgentDefinitionsRequestSchema, { since }), {
      signal: abort.signal,
      headers: { authorization },
    })) {
      if (event.type === AgentDefinitionEvent_EventType.BOOKMARK) continue;
      revisions.push(event.revision);
      if (revisions.length >= DEFINITIONS) break;
    }
  } catch (err) {
    const error = ConnectError.from(err);
    if (error.code !== Code.ResourceExhausted && error.code !== Code.Unavailable) throw err;
    if (/too|behind/.test(error.rawMessage)) met.closed++;
    else met.refused++;
  } finally {
    abort.abort();
  }
}

/** One reader: reads every event, resuming from its last revision a second after a refusal or a closing. */
async function reader(service: ServerProcess, authorization: string, protocol: Protocol, met: Met): Promise<number> {
  const revisions: bigint[] = [];
  const until = Date.now() + DEADLINE_MS;
  while (revisions.length < DEFINITIONS && Date.now() < until) {
    const since = revisions.at(-1) ?? 0n;
    const before = revisions.length;
    if (protocol === "sse") await sseRead(service, authorization, since, revisions, met);
    else await rpcRead(service, authorization, protocol, since, revisions, met);
    if (revisions.length < DEFINITIONS && revisions.length === before) await new Promise((r) => setTimeout(r, 1_000));
  }
  return new Set(revisions).size;
}

/** Seeds, then runs the watchers against `service` (started with the production flags). */
export async function watchReplay(
  service: ServerProcess,
  authorization: string,
  tenant: string,
  log: (message: string) => void,
): Promise<WatchReplayResult> {
  await seedLargeDefinitions(service, authorization, tenant, DEFINITIONS);
  log(`${DEFINITIONS} large definitions in; ${PER_PROTOCOL} watchers of each protocol from since=0`);
  resetPeakRss(service.pid);
  const started = Date.now();
  const latencies: number[] = [];
  let failedProbes = 0;
  let probing = true;
  const probes = (async () => {
    while (probing) {
      const at = performance.now();
      try {
        const res = await fetch(`${service.baseUrl}/healthz`, { signal: AbortSignal.timeout(10_000) });
        await res.arrayBuffer();
        if (res.status !== 200) failedProbes++;
      } catch {
        failedProbes++;
      }
      latencies.push(performance.now() - at);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const silent: (() => void)[] = [];
  const met: Met = { refused: 0, closed: 0 };
  const reached = {} as Record<Protocol, number[]>;
  try {
    for (const protocol of PROTOCOLS)
      for (let i = 0; i < PER_PROTOCOL / 2; i++)
        silent.push((await silentWatcher(service, authorization, protocol)).close);
    const runs = PROTOCOLS.map(async (protocol) => {
      reached[protocol] = await Promise.all(
        Array.from({ length: PER_PROTOCOL / 2 }, () =>
          reader(service, authorization, protocol, met).catch((err: unknown) => {
            log(`${protocol} reader failed: ${String(err).slice(0, 160)}`);
            return 0;
          }),
        ),
      );
    });
    await Promise.all(runs);
  } finally {
    probing = false;
    await probes;
    for (const close of silent) close();
  }
  const peakRssMib = peakRssKib(service.pid) / 1024;
  const survived = await fetch(`${service.baseUrl}/healthz`).then(
    (res) => res.status === 200,
    () => false,
  );
  return {
    peakRssMib,
    reached,
    refused: met.refused,
    closed: met.closed,
    healthz: {
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      max: Math.max(...latencies),
      failed: failedProbes,
    },
    seconds: (Date.now() - started) / 1000,
    survived,
  };
}

/** The Markdown table of the result. */
export function watchReplayReport(result: WatchReplayResult): string {
  const readers = PROTOCOLS.map((p) => `${p} ${result.reached[p]?.join("/") ?? "-"}`).join("; ");
  return [
    `${PER_PROTOCOL} watchers of each protocol from since=0 (half of them reading nothing) over ${DEFINITIONS} ` +
      "definitions of ~750 KB; one service with the production flags",
    "",
    "| peak RSS (MiB) | /healthz p50 / p99 / max (ms) | probes failed | readers reached | refused / closed " +
      "(resumed) | seconds | survived |",
    "| ---: | --- | ---: | --- | --- | ---: | --- |",
    `| ${result.peakRssMib.toFixed(0)} | ${result.healthz.p50.toFixed(1)} / ${result.healthz.p99.toFixed(1)} / ` +
      `${result.healthz.max.toFixed(0)} | ${result.healthz.failed} | ${readers} ` +
      `| ${result.refused} / ${result.closed} | ${result.seconds.toFixed(1)} | ${result.survived ? "yes" : "**no**"} |`,
  ].join("\n");
}
