/**
 * `node --import tsx bench/grpc-candidates.ts [seconds]`: the candidates for
 * serving the gRPC wire (issue 19), each answering GetAgentDefinition with the
 * same fixed message (a ~1.7 KB definition) and no registry behind it, loaded
 * by h2load (one connection, ten streams) in turn, twice, on one machine:
 * - node:http2's stream API, the floor of any Node gRPC server, in the lean
 *   path's shape (the body read by its events, one envelope, trailers);
 * - @grpc/grpc-js's Server (what `createConnectionInjector` would hand our
 *   peeked connections to), its (de)serializers the identity;
 * - connect-node's gRPC handler (what served gRPC before issue 19).
 * What it prints goes into BENCHMARKS.md ("Issue 19").
 */
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type Http2Server, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { create, fromJson, toBinary } from "@bufbuild/protobuf";
import { type ConnectRouter, createContextValues } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { AgentDefinitionSchema } from "../gen/asor/v1/agent_definition_pb.js";
import { AgentDefinitionService, GetAgentDefinitionRequestSchema } from "../gen/asor/v1/agent_definition_service_pb.js";
import { benchDefinition } from "./definition.js";
import { ensureH2load, envelope } from "./wire.js";

const PATH = "/asor.v1.AgentDefinitionService/GetAgentDefinition";
const seconds = Number(process.argv[2] ?? 5);
const definition = fromJson(AgentDefinitionSchema, benchDefinition("Candidate") as never);
const answer = Buffer.from(toBinary(AgentDefinitionSchema, definition));
const answerEnvelope = envelope(answer);
const dir = mkdtempSync(join(tmpdir(), "asor-candidates-"));
const requestFile = join(dir, "request");
writeFileSync(
  requestFile,
  envelope(toBinary(GetAgentDefinitionRequestSchema, create(GetAgentDefinitionRequestSchema, { id: "x" }))),
);

/** A candidate: starts listening on loopback, resolves with its port and how to stop it. */
type Candidate = () => Promise<{ port: number; stop(): Promise<void> }>;

const listening = async (server: Http2Server): Promise<{ port: number; stop(): Promise<void> }> => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
};

/** Reads the request's one message by its events, then answers the fixed envelope and `grpc-status: 0`. */
function answerStream(stream: ServerHttp2Stream): void {
  const chunks: Buffer[] = [];
  stream.on("data", (chunk: Buffer) => chunks.push(chunk));
  stream.once("end", () => {
    stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
    stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.end(answerEnvelope);
  });
}

const candidates: Record<string, Candidate> = {
  "node:http2 stream API": () => {
    const server = createServer();
    server.on("stream", answerStream);
    return listening(server);
  },
  "@grpc/grpc-js Server": async () => {
    const server = new grpc.Server();
    const identity = (b: Buffer) => b;
    server.addService(
      {
        GetAgentDefinition: {
          path: PATH,
          requestStream: false,
          responseStream: false,
          requestSerialize: identity,
          requestDeserialize: identity,
          responseSerialize: identity,
          responseDeserialize: identity,
        },
      },
      {
        GetAgentDefinition: (_call: unknown, callback: (err: null, value: Buffer) => void) => callback(null, answer),
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    return { port, stop: () => new Promise((resolve) => server.tryShutdown(() => resolve())) };
  },
  "connect-node gRPC handler": () => {
    const routes = (router: ConnectRouter) =>
      router.service(AgentDefinitionService, { getAgentDefinition: () => definition } as never);
    const server = createServer(connectNodeAdapter({ routes, contextValues: () => createContextValues() }));
    return listening(server);
  },
};

ensureH2load((m) => console.error(m));
const results: Record<string, number[]> = {};
for (let round = 0; round < 2; round++) {
  for (const [name, start] of Object.entries(candidates)) {
    const { port, stop } = await start();
    // Asynchronously: the server answers from this process's event loop.
    const run = await promisify(execFile)(
      "h2load",
      [
        "-c1",
        "-m10",
        "-D",
        String(seconds),
        "--warm-up-time=1",
        "-d",
        requestFile,
        "-H",
        "content-type: application/grpc",
        "-H",
        "te: trailers",
        `http://127.0.0.1:${port}${PATH}`,
      ],
      { encoding: "utf8" },
    );
    await stop();
    const rps = Number(/finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(run.stdout)?.[1]);
    (results[name] ??= []).push(rps);
    console.error(`${name}: ${rps.toFixed(0)} req/s`);
  }
}
console.log("| candidate (fixed answer, no registry) | req/s, round 1 | round 2 |");
console.log("|---|---:|---:|");
for (const [name, rps] of Object.entries(results))
  console.log(`| ${name} | ${rps.map((r) => r.toFixed(0)).join(" | ")} |`);
process.exit(0);
