/**
 * Issue 12, item 9: a client that disconnects mid-request is no error of the
 * service. It used to be logged at `error` as "unexpected error" with a stack
 * trace; now its request is one `info` access line with status 499, and no
 * error or warning line mentions it.
 */
import { connect as connectHttp2, constants as http2 } from "node:http2";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { capturingLogger } from "../support/capturing-logger.js";
import { type FreshDatabase, forEachDatabase } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { startServer, type TestServer } from "../support/server.js";

const UPSERT = "/asor.v1.AgentDefinitionService/UpsertAgentDefinition";
/** Half of a definition: the body is cut off after it. */
const HALF = JSON.stringify(minimalDefinition({ name: "Gone Midway", description: "d".repeat(20_000) })).slice(
  0,
  10_000,
);

/** Sends an HTTP/1.1 request whose body stops halfway, then closes the connection. */
async function h1Midway(port: number, path: string, headers: Record<string, string>): Promise<void> {
  const socket = connect(port, "127.0.0.1");
  socket.on("error", () => undefined);
  await new Promise((resolve) => socket.once("connect", resolve));
  const head = Object.entries({ host: "x", "content-length": String(HALF.length * 2), ...headers })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n${HALF}`);
  await new Promise((resolve) => setTimeout(resolve, 200));
  socket.destroy();
}

/** Sends a gRPC request over HTTP/2 whose message stops halfway, then cancels the stream. */
async function h2Midway(baseUrl: string, authorization: string, requestId: string): Promise<void> {
  const session = connectHttp2(baseUrl);
  session.on("error", () => undefined);
  const stream = session.request({
    ":method": "POST",
    ":path": UPSERT,
    "content-type": "application/grpc",
    te: "trailers",
    authorization,
    "x-request-id": requestId,
  });
  stream.on("error", () => undefined);
  stream.on("data", () => undefined);
  const frame = Buffer.alloc(5 + 100);
  frame.writeUInt32BE(10_000, 1);
  stream.write(frame);
  await new Promise((resolve) => setTimeout(resolve, 200));
  stream.close(http2.NGHTTP2_CANCEL);
  await new Promise((resolve) => stream.once("close", resolve));
  session.destroy();
}

forEachDatabase((db) => {
  describe("a client that disconnects mid-request", () => {
    let database: FreshDatabase;
    let server: TestServer & { stop(): Promise<void> };
    const logger = capturingLogger();

    beforeAll(async () => {
      database = await db.create();
      server = await startServer(database, {}, logger);
    });
    afterAll(async () => {
      await server?.stop();
      await database?.cleanup();
    });

    /** The lines about `requestId` once its access line is written, and every error or warning since `from`. */
    const outcome = async (requestId: string, from: number) => {
      await vi.waitFor(() =>
        expect(logger.lines.some((l) => l.message === "request" && l.requestId === requestId)).toBe(true),
      );
      const since = logger.lines.slice(from);
      return {
        access: since.filter((l) => l.message === "request" && l.requestId === requestId),
        alarms: since.filter((l) => l.level === "error" || l.level === "warn"),
      };
    };

    it.each([
      ["REST", "/api/asor/v1/default/agentDefinition", "application/json"],
      ["REST multipart", "/asor/v1/agentDefinition", "multipart/form-data; boundary=b"],
      ["Connect", UPSERT, "application/json"],
      ["gRPC-Web", UPSERT, "application/grpc-web+proto"],
    ])(
      "%s over HTTP/1.1: one info access line with status 499, no error and no stack",
      async (name, path, contentType) => {
        const requestId = `gone-${name.replace(/\W/g, "-")}`;
        const from = logger.lines.length;
        await h1Midway(server.port, path, {
          authorization: server.authorization,
          "content-type": contentType,
          "x-request-id": requestId,
        });
        const { access, alarms } = await outcome(requestId, from);
        expect(alarms).toEqual([]);
        expect(access).toHaveLength(1);
        expect(access[0]).toMatchObject({ level: "info", status: 499 });
        expect(JSON.stringify(access[0])).not.toContain("stack");
      },
    );

    it(
      "gRPC over HTTP/2, the stream cancelled mid-message: one info access line with status 499, no " + "error",
      async () => {
        const from = logger.lines.length;
        await h2Midway(server.baseUrl, server.authorization, "gone-grpc");
        const { access, alarms } = await outcome("gone-grpc", from);
        expect(alarms).toEqual([]);
        expect(access).toHaveLength(1);
        expect(access[0]).toMatchObject({ level: "info", status: 499, code: "canceled" });
      },
    );

    it("the service serves the next request as usual", async () => {
      const res = await fetch(`${server.baseUrl}/api/asor/v1/default/agentDefinition`, {
        method: "POST",
        headers: { authorization: server.authorization, "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition({ name: "After Departures" })),
      });
      expect(res.status).toBe(201);
    });
  });
});
