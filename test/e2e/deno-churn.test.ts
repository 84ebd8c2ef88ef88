/**
 * `npm run start:deno` under connection churn: what killed the Deno server
 * (issue 19; docs/deno-http2.md). Deno's node:http2 answered a client's
 * GOAWAY with one of its own from inside nghttp2's receive callback, and the
 * process aborted now and then (an nghttp2 assertion, a segfault or glibc's
 * free() check); a gRPC client closing its channel sends that GOAWAY. The
 * churn here is every way a connection comes and goes: a new connection per
 * call, clients that close their session (GOAWAY) with a call in flight,
 * clients that vanish mid-call (HTTP/2 and HTTP/1.1), sessions left idle
 * until the server times them out, and REST on a new connection per call.
 * Bounded by a count of rounds, not by time; then the process must be alive
 * and answer over REST and gRPC.
 */
import http2 from "node:http2";
import { connect } from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  GetAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { createGrpcJsClient } from "../support/grpc-js-client.js";
import { type ReachableServer, startServerProcess } from "../support/runtimes.js";
import type { ServerProcess } from "../support/server-process.js";

/** Rounds of churn; each round runs every kind of connection below PARALLEL times at once. */
const ROUNDS = 60;
const PARALLEL = 4;
/** The server's idle timeout for HTTP/2 sessions (the least the config accepts), so idle sessions are closed by it. */
const IDLE_TIMEOUT_MS = 100;

const GET_PATH = `/${AgentDefinitionService.typeName}/${AgentDefinitionService.method.getAgentDefinition.name}`;

/** A gRPC request body: the 5-byte frame header (uncompressed, length), then the message. */
function grpcFrame(id: string): Buffer {
  const message = toBinary(GetAgentDefinitionRequestSchema, create(GetAgentDefinitionRequestSchema, { id }));
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

/** Waits for `session` to close (or to fail, which closes it). */
const closed = (session: http2.ClientHttp2Session): Promise<void> =>
  new Promise((resolve) => (session.destroyed ? resolve() : session.once("close", () => resolve())));

describe.skipIf(testDatabases()[0]!.skip)("npm run start:deno under connection churn", () => {
  let database: FreshDatabase;
  let server: ReachableServer & ServerProcess;
  let id: string;

  beforeAll(async () => {
    database = await testDatabases()[0]!.create();
    server = await startServerProcess(database, { HTTP2_IDLE_TIMEOUT_MS: String(IDLE_TIMEOUT_MS) }, "deno");
    const posted = await fetch(`${server.baseUrl}/api/asor/v1/default/agentDefinition`, {
      method: "POST",
      headers: { authorization: server.authorization, "content-type": "application/json" },
      body: JSON.stringify(minimalDefinition({ name: "Churned Agent" })),
    });
    expect(posted.status).toBe(201);
    id = (await posted.json()).id;
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
  });

  it("stays up and answering through every way a connection comes and goes", async () => {
    const { baseUrl, port, authorization } = server;
    const body = grpcFrame(id);
    const headers = {
      ":method": "POST",
      ":path": GET_PATH,
      "content-type": "application/grpc",
      te: "trailers",
      authorization,
    };
    /** One gRPC call on a connection of its own; how the client leaves decides the kind. */
    const h2Call = (leave: "after" | "goaway-mid" | "vanish-mid" | "idle"): Promise<void> =>
      new Promise((resolve) => {
        const session = http2.connect(baseUrl);
        session.on("error", () => {});
        const stream = session.request(headers);
        stream.on("error", () => {});
        stream.end(body);
        stream.resume();
        if (leave === "vanish-mid") {
          stream.once("response", () => session.destroy());
          closed(session).then(resolve);
          return;
        }
        // GOAWAY while the call is in flight, as a gRPC client closing its channel does.
        if (leave === "goaway-mid") setImmediate(() => session.close());
        // "idle": the session stays open with nothing to do, until the server's idle timeout closes it.
        stream.once("close", () => leave !== "idle" && session.close());
        closed(session).then(resolve);
      });
    /** An HTTP/1.1 request whose client disconnects before the answer. */
    const h1Vanish = (): Promise<void> =>
      new Promise((resolve) => {
        const socket = connect(port, "127.0.0.1", () => {
          socket.write(
            `GET /api/asor/v1/default/agentDefinition/${id} HTTP/1.1\r\n` +
              `host: x\r\nauthorization: ${authorization}\r\n\r\n`,
          );
          socket.destroy();
        });
        socket.on("error", () => {});
        socket.once("close", () => resolve());
      });
    const restOnNewConnection = async (): Promise<void> => {
      const res = await fetch(`${baseUrl}/api/asor/v1/default/agentDefinition/${id}`, {
        headers: { authorization, connection: "close" },
      });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    };
    /** @grpc/grpc-js: a new channel per call, closed after it (GOAWAY). */
    const grpcJsChannelPerCall = async (): Promise<void> => {
      const client = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${port}`, authorization);
      try {
        await client.call("getAgentDefinition", create(GetAgentDefinitionRequestSchema, { id }), AgentDefinitionSchema);
      } finally {
        client.close();
      }
    };
    const kinds = [
      () => h2Call("after"),
      // The kind that aborted Deno most often, so twice the others' share.
      () => h2Call("goaway-mid"),
      () => h2Call("goaway-mid"),
      () => h2Call("vanish-mid"),
      () => h2Call("idle"),
      h1Vanish,
      restOnNewConnection,
      grpcJsChannelPerCall,
    ];

    const failures: unknown[] = [];
    for (let round = 0; round < ROUNDS && server.child.exitCode === null; round++) {
      const results = await Promise.allSettled(kinds.flatMap((kind) => Array.from({ length: PARALLEL }, () => kind())));
      for (const result of results) if (result.status === "rejected") failures.push(result.reason);
    }

    expect(server.child.exitCode, `the Deno server exited: ${server.stderr()}`).toBeNull();
    // The calls that expect an answer (REST, @grpc/grpc-js) all got one.
    expect(failures).toEqual([]);
    const res = await fetch(`${baseUrl}/api/asor/v1/default/agentDefinition/${id}`, { headers: { authorization } });
    expect(res.status).toBe(200);
    const grpc = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${port}`, authorization);
    try {
      const answer = await grpc.call(
        "getAgentDefinition",
        create(GetAgentDefinitionRequestSchema, { id }),
        AgentDefinitionSchema,
      );
      expect(answer.id).toBe(id);
    } finally {
      grpc.close();
    }
  }, 300_000);
});
