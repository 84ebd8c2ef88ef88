/**
 * Watchers that start from an old revision of a tenant of large definitions, in a process with the production
 * heap (`npm start`'s --max-old-space-size=128), on each database (issue 50, item 1). A start used to read up to
 * 500 change records with their definitions whole for each watcher at once, and hand a silent watcher its whole
 * replay: 40 definitions of ~750 KB and 16 watchers that read nothing took the process to 1.7 GB (VmHWM; 7.8 GB
 * at 120 definitions and 32), and the audit's four Connect JSON watchers from `since=0` over 120 ended it. Now a
 * replay is read in batches bounded by bytes (WATCH_BATCH_MAX_BYTES), the next once the last was taken, each
 * under one budget of the process (WATCH_REPLAY_MAX_BYTES, asor_watch_replay_bytes); a watcher that takes
 * nothing is closed after WATCH_REPLAY_HOLD_MS and its share goes on; a start that cannot have one in
 * WATCH_REPLAY_WAIT_MS is refused (503 with Retry-After; RESOURCE_EXHAUSTED). Scaled down: 40 definitions, budgets
 * lowered so that the watchers take turns. The process's memory is measured by `npm run bench -- --watch-replay`.
 */
import { create } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  AgentDefinitionEvent_EventType,
  AgentDefinitionService,
  WatchAgentDefinitionsRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { withAuthorization } from "../support/auth.js";
import { type FreshDatabase, forEachDatabase } from "../support/databases.js";
import { largeDefinition } from "../support/definitions.js";
import { type ReachableServer, startServerProcess } from "../support/runtimes.js";
import { PRODUCTION_NODE_FLAGS, type ServerProcess } from "../support/server-process.js";
import { silentWatcher } from "../support/silent-watchers.js";

const DEFINITIONS = 40;
/** The gauge of the replay budget, as /metrics shows it. */
async function replayBytes(baseUrl: string): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("asor_watch_replay_bytes "));
  if (line === undefined) throw new Error("/metrics shows no asor_watch_replay_bytes");
  return Number(line.split(" ")[1]);
}

forEachDatabase((db) => {
  let database: FreshDatabase;
  let server: (ReachableServer & ServerProcess) | undefined;
  const budget = 4 * 1024 * 1024;

  /** A process on the test's database with `env` besides the lowered budget, in place of the last one. */
  async function restart(env: Record<string, string>): Promise<ReachableServer & ServerProcess> {
    await server?.stop();
    server = await startServerProcess(
      database,
      { WATCH_REPLAY_MAX_BYTES: String(budget), ...env },
      "node",
      PRODUCTION_NODE_FLAGS,
    );
    return server;
  }

  beforeAll(async () => {
    database = await db.create();
    const seeding = await restart({});
    for (let i = 0; i < DEFINITIONS; i++) {
      const res = await fetch(`${seeding.baseUrl}/asor/v1/agentDefinition`, {
        method: "POST",
        headers: { authorization: seeding.authorization, "content-type": "application/json" },
        body: JSON.stringify(largeDefinition(i)),
      });
      expect(res.status).toBe(201);
    }
  }, 240_000);

  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
  });
  /** The watch request from `since=0`. */
  const request = create(WatchAgentDefinitionsRequestSchema, { since: 0n });

  /** The revisions of the ADDED events a watcher over `protocol` reads from `since=0` until it has them all. */
  async function readAll(
    server: ReachableServer & ServerProcess,
    protocol: "connect-json" | "grpc-web" | "grpc",
  ): Promise<bigint[]> {
    const options = { baseUrl: server.baseUrl, interceptors: [withAuthorization(server.authorization)] };
    const transport =
      protocol === "grpc"
        ? createGrpcTransport(options)
        : protocol === "grpc-web"
          ? createGrpcWebTransport({ ...options, httpVersion: "1.1" })
          : createConnectTransport({ ...options, httpVersion: "1.1" });
    const client = createClient(AgentDefinitionService, transport);
    const abort = new AbortController();
    const revisions: bigint[] = [];
    const events = client.watchAgentDefinitions(request, {
      signal: abort.signal,
    });
    try {
      for await (const event of events) {
        if (event.type !== AgentDefinitionEvent_EventType.ADDED) continue;
        revisions.push(event.revision);
        if (revisions.length === DEFINITIONS) break;
      }
    } finally {
      abort.abort();
    }
    return revisions;
  }

  it("serves watchers of every protocol from since=0 in turns, beside watchers that read nothing", async () => {
    // Long enough to wait for the silent watchers to be closed, one round of two after another.
    const server = await restart({ WATCH_REPLAY_WAIT_MS: "60000", WATCH_REPLAY_HOLD_MS: "1500" });
    const silent = [
      ...(await Promise.all(
        (["sse", "connect-json", "grpc-web"] as const).map((protocol) =>
          silentWatcher(server, server.authorization, protocol),
        ),
      )),
      await silentWatcher(server, server.authorization, "grpc"),
    ];
    // What the budget holds, and whether the process answers its probe, throughout.
    const held: number[] = [];
    const probes: number[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        held.push(await replayBytes(server.baseUrl));
        probes.push((await fetch(`${server.baseUrl}/healthz`)).status);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    try {
      const protocols = ["connect-json", "connect-json", "connect-json", "connect-json", "grpc-web", "grpc"] as const;
      const read = await Promise.all(protocols.map((protocol) => readAll(server, protocol)));
      // Every reading watcher got every definition's event, in revision order, with no gap or repeat.
      const expected = read[0]!;
      expect(expected).toHaveLength(DEFINITIONS);
      expect([...expected].sort((a, b) => (a < b ? -1 : 1))).toEqual(expected);
      for (const revisions of read) expect(revisions).toEqual(expected);
    } finally {
      sampling = false;
      await sampler;
      for (const watcher of silent) watcher.close();
    }
    // The replays took turns within the budget, and the process answered throughout.
    expect(Math.max(...held)).toBeGreaterThan(0);
    expect(Math.max(...held)).toBeLessThanOrEqual(budget);
    expect(probes.every((status) => status === 200)).toBe(true);
    expect(server.child.exitCode).toBeNull();
    // Every share went back once the watchers were gone.
    await expect.poll(() => replayBytes(server.baseUrl)).toBe(0);
  }, 240_000);

  it("refuses a start that cannot have its share in time: 503 with Retry-After, or RESOURCE_EXHAUSTED", async () => {
    const server = await restart({ WATCH_REPLAY_WAIT_MS: "300", WATCH_REPLAY_HOLD_MS: "60000" });
    // Two silent watchers hold the budget (a large definition each) once the socket buffers between them and the
    // process are full: they go on a few reads until then.
    const silent = await Promise.all(["sse", "sse"].map(() => silentWatcher(server, server.authorization, "sse")));
    try {
      for (const head of await Promise.all(silent.map((watcher) => watcher.head)))
        expect(head).toMatch(/^HTTP\/1.1 200/);
      const holding = async () => {
        await expect.poll(() => replayBytes(server.baseUrl)).toBeGreaterThan(budget / 2);
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        return replayBytes(server.baseUrl);
      };
      await expect.poll(holding, { timeout: 30_000 }).toBeGreaterThan(budget / 2);
      // A third waits past WATCH_REPLAY_WAIT_MS and is refused, with a Retry-After.
      const third = await silentWatcher(server, server.authorization, "sse");
      silent.push(third);
      expect(await third.head).toMatch(/^HTTP\/1.1 503[\s\S]*\r\nretry-after: 1(\r\n|$)/i);
      // A REST watch now: the same refusal in the error body.
      const res = await fetch(`${server.baseUrl}/asor/v1/agentDefinitionEvents?since=0`, {
        headers: { authorization: server.authorization, accept: "text/event-stream" },
      });
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("1");
      expect(await res.json()).toMatchObject({ code: "WATCH_REPLAY_BUSY" });
      // And over gRPC.
      await expect(readAll(server, "grpc")).rejects.toMatchObject({ code: Code.ResourceExhausted });
      // A watch from now needs no share: it is served.
      const live = await fetch(`${server.baseUrl}/asor/v1/agentDefinitionEvents`, {
        headers: { authorization: server.authorization, accept: "text/event-stream" },
      });
      expect(live.status).toBe(200);
      await live.body?.cancel();
    } finally {
      for (const watcher of silent) watcher.close();
    }
    // The holders' clients left: the next start from since=0 is served.
    await expect.poll(() => replayBytes(server.baseUrl)).toBe(0);
    expect(await readAll(server, "connect-json")).toHaveLength(DEFINITIONS);
  }, 240_000);
});
