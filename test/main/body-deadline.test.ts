/**
 * HTTP/1.1's body deadline (src/node/body-deadline.ts) lets go of a request whose connection closed: a request
 * refused before its body ended (the body budget's 503, a 401) and then closed emits neither "end" nor "close",
 * and the deadline's timer held it, with every byte of body read for it, until HTTP_BODY_TIMEOUT_MS (issue 25,
 * item 5: 600 refused 1 MB bodies held 37 MiB for 10 s).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { bodyDeadline } from "../../src/node/body-deadline.js";

/**
 * `bodyDeadline` on `req`, with the timers it set: counting the process's active timers instead (as this test once
 * did) also counted the test runner's own (its reports to the main process each hold a timeout while they wait),
 * and failed now and then on a loaded machine.
 */
function deadlineWithTimers(req: IncomingMessage, res: ServerResponse, ms: number): NodeJS.Timeout[] {
  const set = vi.spyOn(globalThis, "setTimeout");
  try {
    bodyDeadline(req, res, ms);
    return set.mock.results.map((r) => r.value as NodeJS.Timeout);
  } finally {
    set.mockRestore();
  }
}

/** Resolves once `emitter` has emitted `event`. */
const once = (emitter: NodeJS.EventEmitter, event: string): Promise<void> =>
  new Promise((resolve) => emitter.once(event, () => resolve()));

describe("the HTTP/1.1 body deadline", () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  });

  /**
   * A server whose every request gets the deadline (an hour: it never fires here) and is answered at once, body
   * unread, as a refusal is. Resolves with its port and a promise of the request's socket closing.
   */
  async function refusingServer(answer: (req: IncomingMessage, res: ServerResponse) => void) {
    let closed: Promise<void> | undefined;
    const timers: NodeJS.Timeout[] = [];
    server = createServer((req, res) => {
      timers.push(...deadlineWithTimers(req, res, 3_600_000));
      closed = once(req.socket, "close");
      answer(req, res);
    });
    await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
    return { port: (server.address() as AddressInfo).port, closed: () => closed, timers };
  }

  /** Sends a request declaring a 1 MB body and 100 KB of it, then nothing; resolves when the server closed. */
  function partialBody(port: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, "127.0.0.1", () => {
        socket.write(
          "POST /x HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n",
        );
        socket.write(Buffer.alloc(100_000, "x"));
      });
      let answer = "";
      socket.on("data", (chunk: Buffer) => (answer += chunk.toString("latin1")));
      socket.on("error", reject);
      socket.on("close", () => resolve(answer));
    });
  }

  it("stops its timer when the connection of a request answered before its body ended closes", async () => {
    const { port, closed, timers } = await refusingServer((_req, res) => {
      res.writeHead(503, { connection: "close", "content-type": "application/json" });
      res.end('{"code":"OVERLOADED"}');
    });
    const cleared = vi.spyOn(globalThis, "clearTimeout");
    const answer = await partialBody(port);
    expect(answer.startsWith("HTTP/1.1 503")).toBe(true);
    await closed();
    // The server's socket closed: nothing of this request may still be waited for.
    await new Promise((resolve) => setImmediate(resolve));
    expect(timers).toHaveLength(1);
    expect(cleared.mock.calls.map(([timer]) => timer)).toContain(timers[0]);
    cleared.mockRestore();
  });

  it("still answers 408 to a body that stops, on a connection left open", async () => {
    server = createServer((req, res) => {
      bodyDeadline(req, res, 200);
      req.resume();
      req.on("end", () => res.end("whole"));
    });
    await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
    const answer = await partialBody((server.address() as AddressInfo).port);
    expect(answer.startsWith("HTTP/1.1 408")).toBe(true);
    expect(answer).toContain("REQUEST_TIMEOUT");
  });
});
