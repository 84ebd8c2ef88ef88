/**
 * Node's private objects the Node adapter reads, each pinned here so that a Node that stops keeping them fails
 * a test instead of the adapter going wrong in silence. `socket._httpMessage` is the response an HTTP/1.1
 * socket is writing: src/node/answer.ts (chunkedSocket) writes a watch's batches to the socket straight only
 * while it is that response's (else an SSE batch goes back to three writes an event), and
 * src/node/http1-refusals.ts (responseStarted) writes no refusal into the middle of an answer under way.
 */
import { once } from "node:events";
import { createServer, type Server, type ServerResponse } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { chunkedSocket } from "../../src/node/answer.js";
import { responseStarted } from "../../src/node/http1-refusals.js";

let server: Server | undefined;
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
  server = undefined;
});

/** A server answering each request with `handle`, listening on a free port; and a raw client socket to it. */
async function serve(handle: (res: ServerResponse) => void): Promise<{ server: Server; client: Socket }> {
  server = createServer((_req, res) => handle(res));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const client = connect((server.address() as AddressInfo).port, "127.0.0.1");
  await once(client, "connect");
  return { server, client };
}

describe("socket._httpMessage (Node's HTTP/1.1 server)", () => {
  it("names the response a socket is writing: a chunked answer under way has its socket to itself", async () => {
    const seen: unknown[] = [];
    const { client } = await serve((res) => {
      seen.push(chunkedSocket(res) === undefined);
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
      seen.push(chunkedSocket(res) === res.socket);
      res.end();
    });
    client.write("GET / HTTP/1.1\r\nhost: x\r\n\r\n");
    await once(client, "data");
    // Before its headers are sent an answer has no socket of its own; once they are, it has.
    expect(seen).toEqual([true, true]);
  });

  it("names the answer under way when the parser refuses what follows it on the connection", async () => {
    const started: boolean[] = [];
    const { server: s, client } = await serve((res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
    });
    s.on("clientError", (_err: Error, socket: Duplex) => {
      started.push(responseStarted(socket));
      socket.destroy();
    });
    client.write("GET / HTTP/1.1\r\nhost: x\r\n\r\n");
    await once(client, "data");
    client.write("NOT HTTP AT ALL\r\n\r\n");
    await once(client, "close");
    expect(started).toEqual([true]);
  });
});
