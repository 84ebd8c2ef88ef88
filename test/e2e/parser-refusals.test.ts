/**
 * What Node's HTTP/1.1 parser refuses before a request exists is answered in
 * the contract's error shape and logged (issue 23, item 8): a query past the
 * header limit used to get Node's bare `431` (no body, not documented, not
 * logged), as did bytes that are no HTTP (`400`).
 */
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { capturingLogger } from "../support/capturing-logger.js";
import type { FreshDatabase } from "../support/databases.js";
import { testDatabases } from "../support/databases.js";
import { startServer, type TestServer } from "../support/server.js";

/** Sends `request` as raw bytes and resolves with everything the server wrote before it closed the connection. */
function exchange(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(request));
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("error", reject);
    socket.on("close", () => resolve(Buffer.concat(chunks).toString("utf8")));
  });
}

/** The status and JSON body of a raw HTTP/1.1 answer. */
function parsed(answer: string): { status: number; headers: string; body: any } {
  const [head = "", body = ""] = answer.split("\r\n\r\n");
  return { status: Number(head.split(" ")[1]), headers: head.toLowerCase(), body: JSON.parse(body) };
}

describe("refusals of the HTTP parser", () => {
  const logger = capturingLogger();
  let database: FreshDatabase;
  let server: TestServer & { stop(): Promise<void> };
  beforeAll(async () => {
    database = await testDatabases()[0]!.create();
    server = await startServer(database, {}, logger);
  });
  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
  });

  it("answers a list query longer than the header limit 431 in the error shape, and logs it", async () => {
    const query = Array.from({ length: 200 }, (_, i) => `name=${"n".repeat(100)}${i}`).join("&");
    const answer = parsed(
      await exchange(
        server.port,
        `GET /asor/v1/agentDefinition?${query} HTTP/1.1\r\nHost: x\r\nAuthorization: ${server.authorization}\r\n\r\n`,
      ),
    );
    expect(answer.status).toBe(431);
    expect(answer.headers).toContain("content-type: application/json");
    expect(answer.headers).toContain("connection: close");
    expect(answer.body).toMatchObject({
      error: expect.stringMatching(/too large/),
      errors: [{ code: "HEADERS_TOO_LARGE" }],
    });
    expect(logger.lines).toContainEqual(
      expect.objectContaining({
        message: "request refused before it could be read",
        status: 431,
        code: "HEADERS_TOO_LARGE",
      }),
    );
  });

  it("answers bytes that are no HTTP request 400 MALFORMED_REQUEST in the error shape", async () => {
    const answer = parsed(await exchange(server.port, "HELLO THERE\r\n\r\n"));
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ errors: [{ code: "MALFORMED_REQUEST" }] });
  });

  it("still serves the next connection", async () => {
    expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200);
  });
});
