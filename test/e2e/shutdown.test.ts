import { request as httpRequest } from "node:http";
import { type ClientHttp2Session, type ClientHttp2Stream, connect as http2Connect } from "node:http2";
import { connect as netConnect, type Socket } from "node:net";
import { createInterface } from "node:readline";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  GetAgentDefinitionRequestSchema,
  ListAgentDefinitionsRequestSchema,
  ListAgentDefinitionsResponseSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { openLocalIssuer } from "../../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import type { FreshDatabase } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { runtimesAndDatabases } from "../support/runtimes.js";
import { type ServerProcess, spawnServer } from "../support/server-process.js";

/** How one request of the burst ended. `broken` is what graceful shutdown must never produce. */
type Outcome = { kind: "ok" } | { kind: "refused"; how: string } | { kind: "broken"; how: string };

const BURST = 200;
/** SIGTERM goes out when this many requests of the burst have finished: the rest are in flight or queued. */
const SIGTERM_AFTER = 20;
/** Connection failures that mean the request never got an answer started: refused, not cut off. */
const REFUSED_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "UND_ERR_SOCKET"]);

/**
 * SIGTERM in the middle of traffic. Requests that are surely in flight when
 * the signal lands (a REST POST and a gRPC call whose bodies are held back
 * until the drain has begun) show that the drain waits for them; a burst of
 * concurrent REST and gRPC calls shows that nothing is cut off, whenever the
 * signal happens to land. No assertion depends on timing.
 */
for (const [db, runtime] of runtimesAndDatabases()) {
  describe.skipIf(db.skip)(`graceful shutdown on ${db.name} under ${runtime}`, () => {
    let database: FreshDatabase;
    let server: ServerProcess;
    let authorization: string;
    let definitionId: string;
    const results: {
      exitCode?: number | null;
      burst?: Outcome[];
      slowRest?: { status: number; connection: string | undefined; body: string };
      slowGrpc?: { status: string | undefined; message: string | undefined };
      goaway?: { errorCode: number; lastStreamId: number; streamId: number; newStream: string };
      newConnection?: string;
      drainingH1?: string;
      linesAfterShutdown?: number;
    } = {};

    beforeAll(async () => {
      database = await db.create();
      server = await spawnServer(
        {
          DATA_DIR: database.dataDir,
          ...(database.databaseUrl ? { DATABASE_URL: database.databaseUrl } : {}),
          // Far beyond what the drain needs, so a slow machine never reaches the deadline.
          SHUTDOWN_TIMEOUT_MS: "60000",
        },
        runtime,
      );
      const lines: Record<string, unknown>[] = [];
      createInterface({ input: server.child.stdout! }).on("line", (line) => {
        try {
          lines.push(JSON.parse(line));
        } catch {
          // not a log line
        }
      });
      const shuttingDown = new Promise<void>((resolve) => {
        const timer = setInterval(() => {
          if (lines.some((l) => l.message === "shutting down") || server.child.exitCode !== null)
            resolve(clearInterval(timer));
        }, 5);
      });
      const issuer = await openLocalIssuer(localIssuerKeyFile(database.dataDir), parseAuthConfig({}).config);
      authorization = `Bearer ${await issuer.issue({ tenant: "default", domains: ["Development", "Setup: Agents"] })}`;
      const seeded = await fetch(`${server.baseUrl}/api/asor/v1/default/agentDefinition`, {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition({ name: "Seed" })),
      });
      definitionId = ((await seeded.json()) as { id: string }).id;

      // In flight for sure: headers received by the server, bodies held back.
      const slowRest = startSlowPost(server.port, authorization, JSON.stringify(minimalDefinition({ name: "Slow" })));
      await slowRest.started;
      const session = http2Connect(server.baseUrl);
      session.on("error", () => undefined); // a session cut by a broken server fails the assertions, not the run
      const goaway = new Promise<[number, number]>((resolve) => {
        session.once("goaway", (errorCode, lastStreamId) => resolve([errorCode, lastStreamId]));
        session.once("close", () => resolve([-1, -1]));
      });
      const slowGrpc = startSlowGrpc(
        session,
        authorization,
        toBinary(GetAgentDefinitionRequestSchema, create(GetAgentDefinitionRequestSchema, { id: definitionId })),
      );
      await slowGrpc.started;
      // A connection that has sent half a request's headers: it is answered only after the drain began.
      const partial = await connectedSocket(server.port);
      partial.write("GET /healthz HTTP/1.1\r\nHost: registry\r\n");
      const partialAnswer = readAll(partial);

      let finished = 0;
      let exited: Promise<number | null> | undefined;
      const counted = (outcome: Promise<Outcome>) =>
        outcome.finally(() => {
          if (++finished === SIGTERM_AFTER) exited = server.stop();
        });
      const grpcClient = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
      // Connected before the burst, so its calls are streams on a live connection when GOAWAY comes.
      await new Promise<void>((resolve, reject) =>
        grpcClient.waitForReady(Date.now() + 30_000, (err) => (err ? reject(err) : resolve())),
      );
      const burst = Array.from({ length: BURST }, (_, i) =>
        counted(
          i % 2 === 0
            ? restCall(server.baseUrl, authorization, definitionId, i)
            : grpcCall(grpcClient, authorization, definitionId, i),
        ),
      );

      await shuttingDown;
      const shutdownLine = lines.findIndex((l) => l.message === "shutting down");
      results.newConnection = await connectionOutcome(server.port);
      const [errorCode, lastStreamId] = await goaway;
      results.goaway = {
        errorCode,
        lastStreamId,
        streamId: slowGrpc.stream.id ?? -1,
        newStream: newStreamOutcome(session),
      };
      if (partial.writable) partial.write("\r\n");
      results.drainingH1 = await partialAnswer;
      results.slowRest = await slowRest
        .finish()
        .catch((err: NodeJS.ErrnoException) => ({ status: 0, connection: undefined, body: String(err.code ?? err) }));
      results.slowGrpc = await slowGrpc.finish();
      results.burst = await Promise.all(burst);
      grpcClient.close();
      session.close();
      results.exitCode = await exited;
      results.linesAfterShutdown = lines.slice(shutdownLine + 1).filter((l) => l.message === "request").length;
    }, 120_000);

    afterAll(async () => {
      // Only when the scenario failed half-way: the drain would wait for requests it holds.
      if (server?.child.exitCode === null) server.child.kill("SIGKILL");
      await database?.cleanup();
    });

    it("answers every request of a burst in full or refuses it cleanly, never cutting one off", () => {
      const outcomes = results.burst!;
      expect(outcomes).toHaveLength(BURST);
      expect(outcomes.filter((o) => o.kind === "broken")).toEqual([]);
      expect(outcomes.filter((o) => o.kind === "ok").length).toBeGreaterThanOrEqual(SIGTERM_AFTER);
    });

    it("lets a REST request in flight at SIGTERM finish, and closes its connection after the answer", () => {
      expect(results.slowRest).toMatchObject({ status: 201, connection: "close" });
      expect(JSON.parse(results.slowRest!.body)).toMatchObject({
        name: "Slow",
        id: expect.stringMatching(/^[0-9a-f]{32}$/),
      });
    });

    it("lets a gRPC call in flight at SIGTERM finish with its full message", () => {
      expect(results.slowGrpc).toEqual({ status: "0", message: definitionId });
    });

    it("sends HTTP/2 clients GOAWAY that still covers their streams in flight, and takes no new stream", () => {
      expect(results.goaway).toMatchObject({ errorCode: 0, newStream: "ERR_HTTP2_GOAWAY_SESSION" });
      expect(results.goaway!.lastStreamId).toBeGreaterThanOrEqual(results.goaway!.streamId);
    });

    it(
      "answers an HTTP/1.1 request that arrives during the drain with 503, the error body and Connection: " + "close",
      () => {
        const [head = "", body = ""] = results.drainingH1!.split("\r\n\r\n");
        expect(head.split("\r\n")[0]).toBe("HTTP/1.1 503 Service Unavailable");
        expect(head.toLowerCase()).toContain("\r\nconnection: close");
        expect(JSON.parse(body)).toMatchObject({ code: "UNAVAILABLE", error: expect.any(String) });
      },
    );

    it("stops accepting connections as soon as the drain begins", () => {
      expect(results.newConnection).toBe("ECONNREFUSED");
    });

    it("logs the requests it finished while draining, then exits 0", () => {
      // At least the two held-back requests and the refused one finished after the signal.
      expect(results.linesAfterShutdown).toBeGreaterThanOrEqual(3);
      expect(results.exitCode).toBe(0);
    });
  });
}

/** One REST call of the burst: reads by id, lists, and writes in turn. */
async function restCall(baseUrl: string, authorization: string, id: string, i: number): Promise<Outcome> {
  const kind = ["get", "list", "post"][i % 3]!;
  const url =
    kind === "get"
      ? `${baseUrl}/api/asor/v1/default/agentDefinition/${id}`
      : `${baseUrl}/api/asor/v1/default/agentDefinition?limit=5`;
  const init: RequestInit =
    kind === "post"
      ? {
          method: "POST",
          headers: { authorization, "content-type": "application/json" },
          body: JSON.stringify(minimalDefinition({ name: `Burst ${i}` })),
        }
      : { headers: { authorization } };
  let res: Response;
  try {
    res = await fetch(kind === "post" ? `${baseUrl}/api/asor/v1/default/agentDefinition` : url, init);
  } catch (err) {
    // fetch rejects only before the answer's headers: the request was refused, not cut off.
    const code = ((err as Error).cause as { code?: string } | undefined)?.code ?? "";
    return REFUSED_CODES.has(code)
      ? { kind: "refused", how: code }
      : { kind: "broken", how: `${kind}: ${String((err as Error).cause ?? err)}` };
  }
  let text: string;
  try {
    text = await res.text();
  } catch (err) {
    return { kind: "broken", how: `${kind}: cut off after the headers: ${String((err as Error).cause ?? err)}` };
  }
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(text);
  } catch {
    return { kind: "broken", how: `${kind}: ${res.status} with a truncated body: ${text.slice(-80)}` };
  }
  if (res.status === 503 && body.code === "UNAVAILABLE") return { kind: "refused", how: "503" };
  const whole =
    kind === "get"
      ? res.status === 200 && body.id === id
      : kind === "list"
        ? res.status === 200 && Array.isArray(body.data)
        : res.status === 201 && body.name === `Burst ${i}`;
  return whole ? { kind: "ok" } : { kind: "broken", how: `${kind}: ${res.status} ${text.slice(0, 200)}` };
}

/** One gRPC call of the burst (@grpc/grpc-js): a get by id or a list. */
function grpcCall(client: grpc.Client, authorization: string, id: string, i: number): Promise<Outcome> {
  const metadata = new grpc.Metadata();
  metadata.set("authorization", authorization);
  const get = i % 4 === 1;
  return new Promise((resolve) => {
    let answered = false;
    const done = (err: grpc.ServiceError | null, value?: unknown): void => {
      if (err === null) {
        const whole = get ? (value as { id?: string }).id === id : Array.isArray((value as { data?: unknown[] }).data);
        resolve(whole ? { kind: "ok" } : { kind: "broken", how: "an incomplete message" });
      } else if (err.code === grpc.status.UNAVAILABLE && !answered) {
        // Refused before any answer began: GOAWAY or a closed listener.
        resolve({ kind: "refused", how: err.details });
      } else {
        resolve({
          kind: "broken",
          how: `${grpc.status[err.code]} after ${answered ? "the answer began" : "no answer"}: ${err.details}`,
        });
      }
    };
    const call = get
      ? client.makeUnaryRequest(
          "/asor.v1.AgentDefinitionService/GetAgentDefinition",
          (m: { id: string }) =>
            Buffer.from(toBinary(GetAgentDefinitionRequestSchema, create(GetAgentDefinitionRequestSchema, m))),
          (b: Buffer) => fromBinary(AgentDefinitionSchema, b),
          { id },
          metadata,
          done,
        )
      : client.makeUnaryRequest(
          "/asor.v1.AgentDefinitionService/ListAgentDefinitions",
          (m: { limit: number }) =>
            Buffer.from(toBinary(ListAgentDefinitionsRequestSchema, create(ListAgentDefinitionsRequestSchema, m))),
          (b: Buffer) => fromBinary(ListAgentDefinitionsResponseSchema, b),
          { limit: 5 },
          metadata,
          done,
        );
    call.on("metadata", () => {
      answered = true;
    });
  });
}

/**
 * A REST POST whose headers the server has received (it answered 100
 * Continue) and whose body is held back half-way until `finish`.
 */
function startSlowPost(port: number, authorization: string, body: string) {
  const bytes = Buffer.from(body);
  const half = Math.floor(bytes.length / 2);
  const req = httpRequest({
    host: "127.0.0.1",
    port,
    method: "POST",
    path: "/api/asor/v1/default/agentDefinition",
    headers: {
      authorization,
      "content-type": "application/json",
      "content-length": bytes.length,
      expect: "100-continue",
    },
  });
  const started = new Promise<void>((resolve, reject) => {
    req.on("error", reject);
    req.once("continue", () => req.write(bytes.subarray(0, half), () => resolve()));
  });
  const response = new Promise<{ status: number; connection: string | undefined; body: string }>((resolve, reject) => {
    req.on("error", reject);
    req.once("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.once("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          connection: res.headers.connection,
          body: Buffer.concat(chunks).toString(),
        }),
      );
      res.once("error", reject);
    });
  });
  // Rejections are read by finish(); until then they must not count as unhandled.
  response.catch(() => undefined);
  req.flushHeaders();
  return {
    started,
    finish: () => {
      req.end(bytes.subarray(half));
      return response;
    },
  };
}

/**
 * A gRPC GetAgentDefinition over a raw HTTP/2 stream whose message is held
 * back half-way until `finish`. `started` resolves once the server has
 * acknowledged a PING sent after the stream's first frames, so it has them.
 */
function startSlowGrpc(session: ClientHttp2Session, authorization: string, message: Uint8Array) {
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  const stream: ClientHttp2Stream = session.request({
    ":method": "POST",
    ":path": "/asor.v1.AgentDefinitionService/GetAgentDefinition",
    "content-type": "application/grpc",
    te: "trailers",
    authorization,
  });
  const chunks: Buffer[] = [];
  let status: string | undefined;
  stream.on("error", () => undefined); // a reset stream shows as a missing status
  stream.on("data", (c: Buffer) => chunks.push(c));
  stream.on("trailers", (trailers) => {
    status = String(trailers["grpc-status"]);
  });
  const closed = new Promise<void>((resolve) => stream.once("close", () => resolve()));
  stream.write(frame.subarray(0, 3));
  const connected = new Promise<void>((resolve) =>
    session.connecting ? session.once("connect", () => resolve()) : resolve(),
  );
  const started = connected.then(
    () => new Promise<void>((resolve, reject) => session.ping((err) => (err ? reject(err) : resolve()))),
  );
  return {
    stream,
    started,
    finish: async () => {
      if (stream.writable) stream.end(frame.subarray(3));
      await closed;
      const body = Buffer.concat(chunks);
      let message: string | undefined;
      try {
        message = fromBinary(AgentDefinitionSchema, body.subarray(5, 5 + body.readUInt32BE(1))).id;
      } catch {
        // no message, or a truncated one
      }
      return { status, message };
    },
  };
}

function connectedSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = netConnect(port, "127.0.0.1", () => resolve(socket));
    socket.once("error", reject);
  });
}

/** Everything the server sends on `socket` until it closes the connection. */
function readAll(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", () => undefined); // a reset shows as a missing answer
    socket.once("close", () => resolve(Buffer.concat(chunks).toString()));
  });
}

/** What happens to a new TCP connection: `connected`, or the error code. */
function connectionOutcome(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = netConnect(port, "127.0.0.1", () => {
      socket.destroy();
      resolve("connected");
    });
    socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? String(err)));
  });
}

/** What happens to a new stream on a session that received GOAWAY: `opened`, or the error code. */
function newStreamOutcome(session: ClientHttp2Session): string {
  try {
    const stream = session.request({
      ":method": "POST",
      ":path": "/asor.v1.AgentDefinitionService/ListAgentDefinitions",
      "content-type": "application/grpc",
    });
    stream.close();
    return "opened";
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? String(err);
  }
}
