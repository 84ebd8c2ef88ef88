/**
 * Issue 25, item 5: what clients hold in the server's memory is bounded. The
 * request bytes all requests hold (MAX_BUFFERED_BODY_BYTES), how long a body
 * may take (HTTP_BODY_TIMEOUT_MS), how many connections are open
 * (MAX_CONNECTIONS), how long a connection may take to say which protocol it
 * speaks (one deadline, HTTP_HEADERS_TIMEOUT_MS), and how many Health/Watch
 * streams one connection holds. Real sockets and real HTTP/1.1 and HTTP/2
 * clients; no assertion on elapsed time: each limit shows as a connection
 * closed or a request answered while the client is still holding on.
 */
import {
  type ClientHttp2Session,
  type ClientHttp2Stream,
  connect as connectHttp2,
  constants as http2,
} from "node:http2";
import { connect, type Socket } from "node:net";
import { fromBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterEach, describe, expect, it } from "vitest";
import { ErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { Health, HealthCheckResponse_ServingStatus as Status } from "../../gen/grpc/health/v1/health_pb.js";
import { postConnectJson, UPSERT_RPC } from "../support/connect-json.js";
import { forEachDatabase, testDatabases } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { useServer } from "../support/server.js";

const PATH = "/api/asor/v1/default/agentDefinition";
const UPSERT = `/${UPSERT_RPC}`;

/** What a raw HTTP/1.1 connection received: the answer's status, headers and body, once whole. */
interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** Resources a test opened, closed after it whatever happened. */
const opened: { destroy(): void }[] = [];
afterEach(() => {
  for (const r of opened.splice(0)) r.destroy();
});

function open(port: number): Promise<Socket> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1", () => resolve(socket));
    socket.on("error", () => undefined);
    opened.push(socket);
  });
}

/** Resolves once the socket is closed. */
const closed = (socket: Socket): Promise<void> =>
  socket.closed ? Promise.resolve() : new Promise((resolve) => socket.once("close", () => resolve()));

/**
 * The first answer on `socket`, once its headers and Content-Length body have arrived; undefined if the
 * socket closes first.
 */
function answerOn(socket: Socket): Promise<RawAnswer | undefined> {
  return new Promise((resolve) => {
    let received = Buffer.alloc(0);
    const done = (answer: RawAnswer | undefined): void => {
      socket.off("data", onData);
      resolve(answer);
    };
    const onData = (chunk: Buffer): void => {
      received = Buffer.concat([received, chunk]);
      const end = received.indexOf("\r\n\r\n");
      if (end === -1) return;
      const [statusLine = "", ...lines] = received.subarray(0, end).toString("latin1").split("\r\n");
      const headers = Object.fromEntries(
        lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]),
      );
      const length = Number(headers["content-length"] ?? 0);
      if (received.length < end + 4 + length) return;
      done({
        status: Number(statusLine.split(" ")[1]),
        headers,
        body: received.subarray(end + 4, end + 4 + length).toString("utf8"),
      });
    };
    socket.on("data", onData);
    socket.once("close", () => done(undefined));
  });
}

/** An HTTP/1.1 POST of a JSON body of `declared` bytes, of which only `sent` are sent: the client then holds on. */
async function partialPost(
  port: number,
  authorization: string,
  declared: number,
  sent: number,
): Promise<{ socket: Socket; answer: Promise<RawAnswer | undefined> }> {
  const socket = await open(port);
  const answer = answerOn(socket);
  socket.write(
    `POST ${PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: ${authorization}\r\nContent-Type: ` +
      `application/json\r\nContent-Length: ${declared}\r\n\r\n`,
  );
  socket.write(`{"name": "${"x".repeat(sent - 11)}`);
  return { socket, answer };
}

function h2session(baseUrl: string): ClientHttp2Session {
  const session = connectHttp2(baseUrl);
  session.on("error", () => undefined);
  opened.push(session);
  return session;
}

/**
 * What an HTTP/2 stream received: its status, headers and trailers together, and its body; once the server
 * ended it (the client may still be sending) or it closed.
 */
function streamResult(
  stream: ClientHttp2Stream,
): Promise<{ status: number; headers: Headers; body: Buffer; rstCode: number }> {
  return new Promise((resolve) => {
    let status = 0;
    const headers = new Headers();
    const chunks: Buffer[] = [];
    const take = (h: Record<string, unknown>): void => {
      for (const [name, value] of Object.entries(h))
        if (!name.startsWith(":") && value !== undefined) headers.set(name, String(value));
    };
    stream.on("response", (h) => {
      status = Number(h[":status"]);
      take(h);
    });
    stream.on("trailers", take);
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("error", () => undefined);
    const done = (): void => resolve({ status, headers, body: Buffer.concat(chunks), rstCode: stream.rstCode ?? -1 });
    stream.once("end", done);
    stream.once("close", done);
  });
}

forEachDatabase((db) => {
  describe("the budget of buffered request bytes", () => {
    const BODY = 64 * 1024;
    // Three whole bodies at the limit, and not one byte more.
    const server = useServer(db, { MAX_BODY_BYTES: String(BODY), MAX_BUFFERED_BODY_BYTES: String(3 * BODY) });

    it(
      "answers a body that would pass it 503 OVERLOADED on REST, Connect and gRPC, over HTTP/1.1 and HTTP/2, and " +
        "gives it back when the holders leave",
      async () => {
        const { port, baseUrl, authorization, app } = server();
        // Three clients send part of a declared 64 KiB body and stop: their bodies are reserved whole.
        const holders = await Promise.all([0, 1, 2].map(() => partialPost(port, authorization, BODY, 30_000)));
        await expect.poll(() => app.bodyBudget.used).toBe(3 * BODY);

        // HTTP/1.1 REST, a partial body too: 503 in the spec's error shape, with Retry-After, while the client
        // still holds on.
        const late = await partialPost(port, authorization, BODY, 30_000);
        const refused = await late.answer;
        expect(refused?.status).toBe(503);
        expect(refused?.headers["retry-after"]).toBe("1");
        expect(JSON.parse(refused?.body ?? "")).toEqual({ error: expect.any(String), code: "OVERLOADED" });
        // Nothing more of a refused body is read: the connection is closed after the answer.
        expect(refused?.headers.connection).toBe("close");
        await closed(late.socket);
        // A whole small body finds no room either.
        const small = await fetch(`${baseUrl}${PATH}`, {
          method: "POST",
          headers: { authorization, "content-type": "application/json" },
          body: JSON.stringify(minimalDefinition({ name: "No Room" })),
        });
        expect(small.status).toBe(503);
        expect(await small.json()).toEqual({ error: expect.any(String), code: "OVERLOADED" });

        // HTTP/2: REST with a partial body, and a gRPC call whose message has not all arrived.
        const session = h2session(baseUrl);
        const rest = session.request({
          ":method": "POST",
          ":path": PATH,
          authorization,
          "content-type": "application/json",
          "content-length": String(BODY),
        });
        const restResult = streamResult(rest);
        rest.write(`{"name": "${"x".repeat(1000)}`);
        const grpc = session.request({
          ":method": "POST",
          ":path": UPSERT,
          authorization,
          "content-type": "application/grpc",
          te: "trailers",
        });
        const grpcResult = streamResult(grpc);
        const envelope = Buffer.alloc(5 + 1000);
        envelope.writeUInt32BE(BODY - 5, 1);
        grpc.write(envelope);
        const restClosed = new Promise((resolve) => rest.once("close", () => resolve(rest.rstCode)));
        const h2rest = await restResult;
        expect(h2rest.status).toBe(503);
        // The stream is reset without error once answered (RFC 9113 §8.1): the client stops sending, the
        // connection stays.
        expect(await restClosed).toBe(http2.NGHTTP2_NO_ERROR);
        expect(h2rest.headers.get("retry-after")).toBe("1");
        expect(JSON.parse(h2rest.body.toString())).toEqual({ error: expect.any(String), code: "OVERLOADED" });
        const h2grpc = await grpcResult;
        const grpcError = findTrailerError(h2grpc.headers);
        expect(grpcError?.code).toBe(Code.Unavailable);
        const detail = grpcError?.details.find((d) => "type" in d && d.type === "asor.v1.Error") as
          | { value: Uint8Array }
          | undefined;
        expect(detail && fromBinary(ErrorSchema, detail.value).code).toBe("OVERLOADED");

        // Connect over HTTP/1.1, a whole small message.
        const connectAnswer = await postConnectJson(
          baseUrl,
          authorization,
          UPSERT_RPC,
          JSON.stringify({ agentCardAndTools: minimalDefinition({ name: "No Room Either" }) }),
        );
        expect(connectAnswer.status).toBe(503);
        expect(connectAnswer.body.code).toBe("unavailable");
        const connectDetail = (connectAnswer.body.details as { type: string; value: string }[]).find(
          (d) => d.type === "asor.v1.Error",
        );
        expect(connectDetail && fromBinary(ErrorSchema, Buffer.from(connectDetail.value, "base64")).code).toBe(
          "OVERLOADED",
        );

        // The holders leave: every byte they held goes back, and the same request is served.
        for (const holder of holders) holder.socket.destroy();
        late.socket.destroy();
        await expect.poll(() => app.bodyBudget.used).toBe(0);
        const after = await fetch(`${baseUrl}${PATH}`, {
          method: "POST",
          headers: { authorization, "content-type": "application/json" },
          body: JSON.stringify(minimalDefinition({ name: "Room Again" })),
        });
        expect(after.status).toBe(201);
        expect(app.bodyBudget.used).toBe(0);
      },
    );

    it("counts a body without Content-Length as it arrives, and refuses it where it passes the budget", async () => {
      const { port, baseUrl, authorization, app } = server();
      const holders = await Promise.all([0, 1].map(() => partialPost(port, authorization, BODY, 30_000)));
      await expect.poll(() => app.bodyBudget.used).toBe(2 * BODY);
      // Chunked, 40,000 bytes at a time: the second chunk takes it past the 64 KiB left.
      const socket = await open(port);
      const answer = answerOn(socket);
      socket.write(
        `POST ${PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: ${authorization}\r\nContent-Type: ` +
          `application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
      );
      const chunk = (text: string): string => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
      socket.write(chunk(`{"name": "${"x".repeat(40_000 - 10)}`));
      socket.write(chunk("y".repeat(40_000)));
      const refused = await answer;
      expect(refused?.status).toBe(503);
      expect(JSON.parse(refused?.body ?? "").code).toBe("OVERLOADED");
      for (const holder of holders) holder.socket.destroy();
      socket.destroy();
      await expect.poll(() => app.bodyBudget.used).toBe(0);
      const after = await fetch(`${baseUrl}${PATH}`, {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition({ name: "Chunked After" })),
      });
      expect(after.status).toBe(201);
    });
  });
});

describe("on sqlite", () => {
  const sqlite = testDatabases()[0]!;

  describe("a body that stalls or trickles", () => {
    // The body deadline is far below the request's (60 s by default), which alone would let these clients hold on.
    const server = useServer(sqlite, { HTTP_BODY_TIMEOUT_MS: "500" });

    it(
      "HTTP/1.1: a body that stops mid-way, or comes a byte at a time, is answered 408 REQUEST_TIMEOUT and its " +
        "connection closed",
      async () => {
        const { port, authorization } = server();
        const stalled = await partialPost(port, authorization, 10_000, 100);
        const trickling = await partialPost(port, authorization, 10_000, 100);
        const timer = setInterval(() => trickling.socket.writable && trickling.socket.write("x"), 50);
        try {
          for (const client of [stalled, trickling]) {
            const answer = await client.answer;
            expect(answer?.status).toBe(408);
            expect(JSON.parse(answer?.body ?? "").errors[0].code).toBe("REQUEST_TIMEOUT");
            await closed(client.socket);
          }
        } finally {
          clearInterval(timer);
        }
      },
    );

    it("HTTP/2: a stream whose body stops mid-way is cancelled, and the connection serves others", async () => {
      const { baseUrl, authorization } = server();
      const session = h2session(baseUrl);
      const grpc = session.request({
        ":method": "POST",
        ":path": UPSERT,
        authorization,
        "content-type": "application/grpc",
        te: "trailers",
      });
      const grpcResult = streamResult(grpc);
      grpc.write(Buffer.from([0, 0, 0, 0, 100, 1, 2]));
      const rest = session.request({
        ":method": "POST",
        ":path": PATH,
        authorization,
        "content-type": "application/json",
        "content-length": "10000",
      });
      const restResult = streamResult(rest);
      rest.write('{"name": "');
      expect((await grpcResult).rstCode).toBe(http2.NGHTTP2_CANCEL);
      expect((await restResult).rstCode).toBe(http2.NGHTTP2_CANCEL);
      const check = await createClient(Health, createGrpcTransport({ baseUrl })).check({ service: "" });
      expect(check.status).toBe(Status.SERVING);
    });
  });

  describe("bodies answered before they ended", () => {
    // The lingering connections are held by their clients for the whole test.
    const server = useServer(sqlite, { HTTP_BODY_TIMEOUT_MS: "60000" });

    it("reads on and drops the rest on at most 16 connections at once; past them the connection closes", async () => {
      const { port } = server();
      // Twenty clients without a valid token declare 1 MB, send 50 KB of it and hold on: each is answered 401.
      const clients = await Promise.all(
        Array.from({ length: 20 }, () => partialPost(port, "Bearer not-a-token", 1_048_576, 50_000)),
      );
      const answers = await Promise.all(clients.map((c) => c.answer));
      for (const answer of answers) expect(answer?.status).toBe(401);
      const closing = clients.filter((_, i) => answers[i]?.headers.connection === "close");
      // Sixteen keep reading (a client still sending gets its answer), four are told the connection closes...
      expect(closing).toHaveLength(4);
      // ...and it does, while their clients still hold on.
      await Promise.all(closing.map((c) => closed(c.socket)));
      for (const c of clients) if (!closing.includes(c)) expect(c.socket.closed).toBe(false);
    });
  });

  describe("the connection cap", () => {
    const server = useServer(sqlite, { MAX_CONNECTIONS: "4" });

    it(
      "closes a connection past MAX_CONNECTIONS at once, counts it, and accepts again once one has " + "closed",
      async () => {
        const { port, baseUrl, app } = server();
        const held = await Promise.all([0, 1, 2, 3].map(() => open(port)));
        const extra = await open(port);
        // Nothing is read from it: it is closed while the first four, as silent, stay open.
        await closed(extra);
        for (const socket of held) expect(socket.closed).toBe(false);
        expect((await app.metrics.render()).body).toMatch(/^asor_connections_refused_total 1$/m);
        // One of the four leaves: once the server has seen it go, a new connection is served.
        held[0]!.destroy();
        await expect
          .poll(async () => {
            try {
              return (await fetch(`${baseUrl}/healthz`)).status;
            } catch {
              return "closed";
            }
          })
          .toBe(200);
      },
    );
  });

  describe("the protocol peek", () => {
    const server = useServer(sqlite, { HTTP_HEADERS_TIMEOUT_MS: "400" });

    it(
      "closes a connection that sends HTTP/2's preface a byte at a time at its one deadline, not an idle timeout " +
        "each byte restarts",
      async () => {
        const { port } = server();
        const socket = await open(port);
        const preface = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        let sent = 0;
        // Every byte comes well within the deadline of the one before; all but the last 50 ms apart.
        const timer = setInterval(() => {
          if (sent < preface.length - 1 && socket.writable) socket.write(preface.subarray(sent, ++sent));
        }, 50);
        try {
          await closed(socket);
        } finally {
          clearInterval(timer);
        }
        expect(sent).toBeLessThan(preface.length - 1);
      },
    );
  });

  describe("Health/Watch per connection", () => {
    const server = useServer(sqlite, { HEALTH_MAX_WATCHES: "10", HEALTH_MAX_WATCHES_PER_CONNECTION: "2" });

    /** Opens a watch on `transport`'s connection; its first status, or the error that refused it. */
    const watch = async (
      transport: ReturnType<typeof createGrpcTransport>,
      signal: AbortSignal,
    ): Promise<Status | Code> => {
      const stream = createClient(Health, transport).watch({ service: "" }, { signal })[Symbol.asyncIterator]();
      try {
        const first = await stream.next();
        return first.done ? Code.Unknown : first.value.status;
      } catch (error) {
        return ConnectError.from(error).code;
      }
    };

    it("refuses one connection a watch past its cap while another connection still gets one", async () => {
      const { baseUrl } = server();
      const one = createGrpcTransport({ baseUrl });
      const other = createGrpcTransport({ baseUrl });
      const controllers = Array.from({ length: 4 }, () => new AbortController());
      opened.push({ destroy: () => controllers.forEach((c) => c.abort()) });
      const [a, b, c, d] = controllers as [AbortController, AbortController, AbortController, AbortController];
      expect(await watch(one, a.signal)).toBe(Status.SERVING);
      expect(await watch(one, b.signal)).toBe(Status.SERVING);
      expect(await watch(one, c.signal)).toBe(Code.ResourceExhausted);
      expect(await watch(other, d.signal)).toBe(Status.SERVING);
      // One of the first connection's watches ends: it may open one again.
      a.abort();
      await expect
        .poll(async () => {
          const retry = new AbortController();
          opened.push({ destroy: () => retry.abort() });
          return watch(one, retry.signal);
        })
        .toBe(Status.SERVING);
    });
  });
});
