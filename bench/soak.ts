/**
 * `npm run bench -- --deno --sqlite --soak <minutes>`: issue 19's soak. Mixed REST and gRPC with connection
 * churn against the service for `minutes`, in rounds: h2load's gRPC GetAgentDefinition on 20 connections
 * closing after 20 calls each (`h2load -c 20 -n 400 -m 1`), h2load's REST GET on 10 HTTP/1.1 connections
 * (`h2load --h1 -c 10 -n 2000`), then a batch of churning clients from here: an @grpc/grpc-js channel per call
 * (closed after it: GOAWAY), HTTP/2 sessions closed (GOAWAY) with their call in flight, HTTP/2 and HTTP/1.1
 * clients vanishing mid-call, REST on a new connection per call. The service's RSS is sampled from /proc once a
 * second. Reports whether the process survived (alive and answering /healthz at the end), its RSS, and the
 * calls answered and failed by kind. Runs under node too (without --deno), for comparison.
 */
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import http2 from "node:http2";
import { connect } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { create, toBinary } from "@bufbuild/protobuf";
import { AgentDefinitionSchema } from "../gen/asor/v1/agent_definition_pb.js";
import { AgentDefinitionService, GetAgentDefinitionRequestSchema } from "../gen/asor/v1/agent_definition_service_pb.js";
import { createGrpcJsClient } from "../test/support/grpc-js-client.js";
import { benchDefinition } from "./definition.js";
import { peakRssKib, rssKib } from "./proc-stats.js";
import type { ServerProcess } from "./processes.js";

const run = promisify(execFile);

export interface SoakResult {
  readonly minutes: number;
  readonly rounds: number;
  readonly survived: boolean;
  /** What the service wrote to stderr after its start-up lines, when it did not survive. */
  readonly death?: string;
  readonly idleRssMib: number;
  readonly peakRssMib: number;
  readonly lastRssMib: number;
  /** RSS at each tenth of the soak, to show growth (or its absence). */
  readonly rssTimeline: number[];
  /** Calls by kind: answered (2xx, gRPC OK) and not. */
  readonly calls: Record<string, { ok: number; failed: number }>;
}

const mib = (kib: number): number => kib / 1024;

export async function soak(
  service: ServerProcess,
  authorization: string,
  tenant: string,
  options: { minutes: number; dataDir: string; log(message: string): void },
): Promise<SoakResult> {
  const { log } = options;
  const { baseUrl, port } = service;
  const posted = await fetch(`${baseUrl}/api/asor/v1/${tenant}/agentDefinition`, {
    method: "POST",
    headers: { authorization, "content-type": "application/json" },
    body: JSON.stringify(benchDefinition("Soak Agent")),
  });
  if (posted.status !== 201) throw new Error(`seeding the soak's definition: ${posted.status} ${await posted.text()}`);
  const { id } = (await posted.json()) as { id: string };

  const message = toBinary(GetAgentDefinitionRequestSchema, create(GetAgentDefinitionRequestSchema, { tenant, id }));
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  const grpcBody = join(options.dataDir, "soak-get.grpc");
  await writeFile(grpcBody, frame);
  const grpcPath = `/${AgentDefinitionService.typeName}/${AgentDefinitionService.method.getAgentDefinition.name}`;
  const restUrl = `${baseUrl}/api/asor/v1/${tenant}/agentDefinition/${id}`;

  const calls: Record<string, { ok: number; failed: number }> = {};
  const count = (kind: string, ok: number, failed: number): void => {
    const entry = (calls[kind] ??= { ok: 0, failed: 0 });
    entry.ok += ok;
    entry.failed += failed;
  };
  const alive = (): boolean => {
    try {
      process.kill(service.pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  /** h2load's own summary line: "requests: N total, N started, N done, N succeeded, N failed, N errored, ...". */
  const h2load = async (kind: string, args: string[]): Promise<void> => {
    try {
      const { stdout } = await run("h2load", args, { maxBuffer: 16 * 1024 * 1024 });
      const [, total, succeeded] = /requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded/.exec(stdout) ?? [];
      const codes = /status codes: (\d+) 2xx/.exec(stdout);
      const ok = Math.min(Number(succeeded ?? 0), Number(codes?.[1] ?? 0));
      count(kind, ok, Number(total ?? 0) - ok);
    } catch (error) {
      count(kind, 0, 1);
      log(`  ${kind}: h2load failed: ${String(error).slice(0, 200)}`);
    }
  };
  const settle = async (kind: string, batch: Promise<unknown>[]): Promise<void> => {
    const results = await Promise.allSettled(batch);
    const ok = results.filter((r) => r.status === "fulfilled").length;
    count(kind, ok, results.length - ok);
  };
  const h2Call = (leave: "goaway-mid" | "vanish-mid"): Promise<void> =>
    new Promise((resolve) => {
      const session = http2.connect(baseUrl);
      session.on("error", () => {});
      const stream = session.request({
        ":method": "POST",
        ":path": grpcPath,
        "content-type": "application/grpc",
        te: "trailers",
        authorization,
      });
      stream.on("error", () => {});
      stream.end(frame);
      stream.resume();
      if (leave === "goaway-mid") setImmediate(() => session.close());
      else stream.once("response", () => session.destroy());
      session.once("close", () => resolve());
    });
  const h1Vanish = (): Promise<void> =>
    new Promise((resolve) => {
      const socket = connect(port, "127.0.0.1", () => {
        socket.write(`GET ${new URL(restUrl).pathname} HTTP/1.1\r\nhost: x\r\nauthorization: ${authorization}\r\n\r\n`);
        socket.destroy();
      });
      socket.on("error", () => {});
      socket.once("close", () => resolve());
    });
  const restNewConnection = async (): Promise<void> => {
    const res = await fetch(restUrl, { headers: { authorization, connection: "close" } });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`REST GET: ${res.status}`);
  };
  const grpcJsChannel = async (): Promise<void> => {
    const client = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${port}`, authorization);
    try {
      await client.call(
        "getAgentDefinition",
        create(GetAgentDefinitionRequestSchema, { tenant, id }),
        AgentDefinitionSchema,
      );
    } finally {
      client.close();
    }
  };
  const times = <T>(n: number, f: () => Promise<T>): Promise<T>[] => Array.from({ length: n }, f);

  const idleRssMib = mib(rssKib(service.pid));
  const started = performance.now();
  const endAt = started + options.minutes * 60_000;
  const samples: { at: number; rss: number }[] = [];
  const sampler = setInterval(() => {
    if (alive()) samples.push({ at: performance.now() - started, rss: mib(rssKib(service.pid)) });
  }, 1_000);
  let rounds = 0;
  try {
    while (performance.now() < endAt && alive()) {
      rounds++;
      // -t 1: one h2load thread (the machine has two cores, and the service needs one).
      await h2load("gRPC, 20 connections x 20 calls (h2load)", [
        ...["-t", "1", "-c", "20", "-n", "400", "-m", "1", "-d", grpcBody],
        ...["-H", "content-type: application/grpc", "-H", "te: trailers", "-H", `authorization: ${authorization}`],
        `${baseUrl}${grpcPath}`,
      ]);
      if (!alive()) break;
      await h2load("REST GET, 10 HTTP/1.1 connections (h2load)", [
        ...["--h1", "-t", "1", "-c", "10", "-n", "2000", "-H", `authorization: ${authorization}`],
        restUrl,
      ]);
      if (!alive()) break;
      await settle("@grpc/grpc-js, a channel per call", times(10, grpcJsChannel));
      await settle(
        "HTTP/2, GOAWAY with the call in flight",
        times(20, () => h2Call("goaway-mid")),
      );
      await settle(
        "HTTP/2, client vanishes mid-call",
        times(10, () => h2Call("vanish-mid")),
      );
      await settle("HTTP/1.1, client vanishes mid-call", times(10, h1Vanish));
      await settle("REST GET, a connection per call", times(20, restNewConnection));
      if (rounds % 20 === 0)
        log(
          `  soak: round ${rounds}, ${((performance.now() - started) / 60_000).toFixed(1)} min, ` +
            `RSS ${samples.at(-1)?.rss.toFixed(0)} MiB`,
        );
    }
  } finally {
    clearInterval(sampler);
  }
  const healthy =
    alive() &&
    (await fetch(`${baseUrl}/healthz`).then(
      (r) => r.status === 200,
      () => false,
    ));
  const peakRssMib = alive() ? mib(peakRssKib(service.pid)) : Math.max(0, ...samples.map((s) => s.rss));
  const rssTimeline = Array.from({ length: 10 }, (_, i) => {
    const at = ((i + 1) / 10) * (samples.at(-1)?.at ?? 0);
    return samples.find((s) => s.at >= at)?.rss ?? 0;
  });
  const stderr = service
    .stderr()
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.includes('"level":"warn"') && !line.includes('"level":"info"'));
  return {
    minutes: options.minutes,
    rounds,
    survived: healthy,
    ...(healthy ? {} : { death: stderr.slice(-5).join("\n") }),
    idleRssMib,
    peakRssMib,
    lastRssMib: samples.at(-1)?.rss ?? 0,
    rssTimeline,
    calls,
  };
}

export function soakReport(result: SoakResult): string {
  const rows = Object.entries(result.calls).map(
    ([kind, { ok, failed }]) => `| ${kind} | ${ok.toLocaleString("en")} | ${failed.toLocaleString("en")} |`,
  );
  return [
    `Soak of ${result.minutes} min, ${result.rounds} rounds: ` +
      `the service ${result.survived ? "survived" : `DIED: ${result.death ?? "(nothing on stderr)"}`}`,
    "",
    `RSS: ${result.idleRssMib.toFixed(0)} MiB idle, peak ${result.peakRssMib.toFixed(0)} MiB, ` +
      `last ${result.lastRssMib.toFixed(0)} MiB; ` +
      `at each tenth: ${result.rssTimeline.map((r) => r.toFixed(0)).join(", ")} MiB`,
    "",
    "| calls | answered | not answered |",
    "|---|---:|---:|",
    ...rows,
  ].join("\n");
}
