/**
 * The edge's answers written to Node's responses: a plain answer in one `writeHead` + `end`, a stream's answer
 * chunk group by chunk group (an HTTP/1.1 one straight to its socket, as one chunk of the chunked coding), and
 * the `grpc-status` a gRPC answer through the compatibility response ends with.
 */
import { Buffer } from "node:buffer";
import type { ServerResponse } from "node:http";
import type { Http2ServerResponse } from "node:http2";
import type { Socket } from "node:net";
import type { HttpAnswer, StreamAnswer } from "../http/http-answer.js";
import type { NodeResponse } from "./request.js";

/** Writes `answer` whole: status, headers with its content-length (none with trailers), body, trailers. */
export function writeAnswer(res: NodeResponse, answer: HttpAnswer): void {
  const headers: Record<string, string> = { ...answer.headers };
  if (answer.body !== null && answer.trailers === undefined) headers["content-length"] = String(answer.body.byteLength);
  // Both Node response kinds take these calls; their typings differ only in `write`.
  (res as ServerResponse).writeHead(answer.status, headers);
  if (answer.trailers !== undefined) (res as ServerResponse).addTrailers(answer.trailers);
  (res as ServerResponse).end(answer.body ?? undefined);
}

/**
 * Writes `chunks` at once (corked: one writev where the stream has it); false when the stream wants a drain
 * before more.
 */
export function writeAll(
  writable: { write(chunk: Uint8Array): boolean; cork?(): void; uncork?(): void },
  chunks: readonly Uint8Array[],
): boolean {
  if (chunks.length === 1) return writable.write(chunks[0] as Uint8Array);
  writable.cork?.();
  let more = true;
  for (const chunk of chunks) more = writable.write(chunk);
  writable.uncork?.();
  return more;
}

/**
 * The socket of an HTTP/1.1 streaming answer whose body may be written to it straight, each group of chunks as
 * one chunk of the chunked transfer coding (writeChunk): its headers sent, chunked, and the socket its own (an
 * answer queued behind another one of its connection is not). Else undefined: the body goes through the
 * response. Through the response every event of a batch was a write of its own, framed as a chunk of its own
 * (three socket writes each): a bare fan-out of 1,000 SSE watchers at 200 events a second, each event 2.3 KB and
 * shared by all, reached 113,000 deliveries a second at 76 % of a core that way, and all 200,000 at 16 % as one
 * chunk a batch (BENCHMARKS.md, "Watch (issue 20)").
 */
export function chunkedSocket(out: ServerResponse): Socket | undefined {
  const socket = out.socket as (Socket & { _httpMessage?: unknown }) | null;
  return out.chunkedEncoding && out.headersSent && socket?._httpMessage === out && socket.writable ? socket : undefined;
}

const CRLF = Buffer.from("\r\n", "latin1");

/**
 * Writes `chunks` to `socket` as one chunk of the chunked transfer coding: its size line, the chunks as they are
 * (shared by every watcher of a change, never copied), CRLF; corked, so one writev. False when the socket wants
 * a drain before more.
 */
function writeChunk(socket: Socket, chunks: readonly Uint8Array[]): boolean {
  let size = 0;
  for (const chunk of chunks) size += chunk.byteLength;
  // A chunk of size 0 would end the body.
  if (size === 0) return true;
  socket.cork();
  socket.write(`${size.toString(16)}\r\n`, "latin1");
  for (const chunk of chunks) socket.write(chunk);
  const more = socket.write(CRLF);
  socket.uncork();
  return more;
}

/** Resolves when `writable` may be written again, or has closed. */
export function drainedOrClosed(writable: NodeJS.EventEmitter): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      writable.off("drain", done);
      writable.off("close", done);
      resolve();
    };
    writable.once("drain", done);
    writable.once("close", done);
  });
}

/**
 * Writes a streaming answer through Node's response (Server-Sent Events; the gRPC watch where the HTTP/2 stream
 * is not served directly, as under another runtime's node:http2): headers at once, each group of chunks as it
 * comes, the next after a drain, then the trailers if any; a response closed first stops the body (its
 * iterator returned), and its signal (clientLeft) has ended the watch.
 */
export async function writeStreamAnswer(res: NodeResponse, answer: StreamAnswer): Promise<void> {
  const out = res as ServerResponse;
  out.writeHead(answer.status, answer.headers);
  out.flushHeaders();
  const socket = chunkedSocket(out);
  // An HTTP/2 answer has no `destroyed` of its own: its stream tells.
  const gone = (): boolean =>
    out.destroyed || socket?.destroyed === true || (res as Partial<Http2ServerResponse>).stream?.destroyed === true;
  for await (const chunks of answer.body) {
    if (gone()) break;
    if (!(socket === undefined ? writeAll(out, chunks) : writeChunk(socket, chunks)))
      await drainedOrClosed(socket ?? out);
  }
  if (gone()) return;
  const trailers = answer.trailers();
  if (Object.keys(trailers).length > 0) out.addTrailers(trailers);
  out.end();
}

/**
 * The `grpc-status` a gRPC answer ends with, read as connect-node hands its
 * trailers to the response: the one place a failure before the interceptors
 * (an unreadable message) shows its code.
 */
export function watchGrpcStatus(res: NodeResponse): () => number | undefined {
  let status: number | undefined;
  const target = res as { addTrailers(headers: Record<string, string | string[]>): void };
  const addTrailers = target.addTrailers.bind(target);
  target.addTrailers = (headers) => {
    const value = Number(headers["grpc-status"]);
    if (Number.isInteger(value)) status = value;
    addTrailers(headers);
  };
  return () => status;
}
