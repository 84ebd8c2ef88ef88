/**
 * Watchers from `since=0` whose clients read nothing once the request is sent (issue 50): the slow readers of the
 * replay test (test/e2e/watch-replay-memory.test.ts) and bench (bench/watch-replay.ts). Each is the request's bytes
 * on a socket of its own, as no client library lets a caller stop reading.
 */
import { once } from "node:events";
import { connect as connectHttp2 } from "node:http2";
import { connect } from "node:net";
import { create, toBinary, toJson } from "@bufbuild/protobuf";
import { WatchAgentDefinitionsRequestSchema } from "../../gen/asor/v1/agent_definition_service_pb.js";

const RPC = "/asor.v1.AgentDefinitionService/WatchAgentDefinitions";
const FROM_START = create(WatchAgentDefinitionsRequestSchema, { since: 0n });

/** `message` in a gRPC (or Connect streaming) envelope. */
function enveloped(message: Uint8Array): Buffer {
  const frame = Buffer.alloc(5 + message.byteLength);
  frame.writeUInt32BE(message.byteLength, 1);
  frame.set(message, 5);
  return frame;
}

export interface SilentWatcher {
  /** The answer's status line and headers (HTTP/1.1 only; gRPC's resolve empty). */
  readonly head: Promise<string>;
  close(): void;
}

/**
 * A watch from `since=0` by a client that reads nothing after the answer's head: SSE, a Connect JSON stream or a
 * gRPC-Web stream over HTTP/1.1, or binary gRPC over HTTP/2 (whose flow control then stops the server).
 */
export async function silentWatcher(
  target: { readonly port: number; readonly baseUrl: string },
  authorization: string,
  protocol: "sse" | "connect-json" | "grpc-web" | "grpc",
): Promise<SilentWatcher> {
  if (protocol === "grpc") {
    const session = connectHttp2(target.baseUrl);
    session.on("error", () => undefined);
    const stream = session.request({
      ":method": "POST",
      ":path": RPC,
      "content-type": "application/grpc+proto",
      te: "trailers",
      authorization,
    });
    stream.on("error", () => undefined);
    stream.end(enveloped(toBinary(WatchAgentDefinitionsRequestSchema, FROM_START)));
    stream.pause();
    return { head: Promise.resolve(""), close: () => session.destroy() };
  }
  const socket = connect(target.port, "127.0.0.1");
  await once(socket, "connect");
  socket.on("error", () => undefined);
  const requestHead = (method: string, path: string, headers: string) =>
    `${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${authorization}\r\n${headers}\r\n`;
  if (protocol === "sse")
    socket.write(requestHead("GET", "/asor/v1/agentDefinitionEvents?since=0", "accept: text/event-stream\r\n"));
  else {
    const body = enveloped(
      protocol === "grpc-web"
        ? toBinary(WatchAgentDefinitionsRequestSchema, FROM_START)
        : new TextEncoder().encode(JSON.stringify(toJson(WatchAgentDefinitionsRequestSchema, FROM_START))),
    );
    const type = protocol === "grpc-web" ? "application/grpc-web+proto" : "application/connect+json";
    socket.write(requestHead("POST", RPC, `content-type: ${type}\r\ncontent-length: ${body.byteLength}\r\n`));
    socket.write(body);
  }
  // The status line and headers, then nothing more is read.
  const head = new Promise<string>((resolve) => {
    let seen = "";
    const onData = (chunk: Buffer) => {
      seen += chunk.toString("latin1");
      const end = seen.indexOf("\r\n\r\n");
      if (end === -1) return;
      socket.off("data", onData);
      socket.pause();
      resolve(seen.slice(0, end));
    };
    socket.on("data", onData);
  });
  return { head, close: () => socket.destroy() };
}
