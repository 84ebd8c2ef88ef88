/**
 * The Node adapter of the edge (src/surfaces/edge.ts), for HTTP/1.1 and HTTP/2
 * alike: it begins each request's record, hands the edge a view of the Node
 * request (no copies: headers are read where Node keeps them, the body is the
 * request stream), and writes what the edge answers: Connect's answer through
 * connect-node, a plain answer in one `writeHead` + `end`.
 */

import { Buffer } from "node:buffer";
import type { IncomingMessage, ServerResponse } from "node:http";
import {
  type Http2ServerRequest,
  type Http2ServerResponse,
  constants as http2Constants,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from "node:http2";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import { Code, ConnectError, type ContextValues } from "@connectrpc/connect";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import { universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { App } from "../app.js";
import { RegistryError, shuttingDown } from "../domain/errors.js";
import { errorAnswer, type HttpAnswer, type StreamAnswer } from "../http/http-answer.js";
import { codeName } from "../observability/request-record.js";
import type { BodyShare } from "../surfaces/body-budget.js";
import type { EdgeRequest, RequestAddresses } from "../surfaces/edge.js";
import { isBinaryGrpc } from "../surfaces/grpc/request.js";
import { callerError } from "../surfaces/pipeline/failures.js";
import { toConnectError } from "../surfaces/pipeline/rpc-errors.js";
import { connectionKey } from "../surfaces/router/connection.js";
import { authorityOf, socketAddresses } from "./request-origin.js";

type NodeRequest = IncomingMessage | Http2ServerRequest;
type NodeResponse = ServerResponse | Http2ServerResponse;

/**
 * How much of a request body left unread by an early answer (a 413, a 401) is
 * read and thrown away, so that a client still sending gets the answer instead
 * of a connection reset; past it the connection is cut. HTTP_REQUEST_TIMEOUT_MS
 * bounds the time it may take.
 */
const LINGER_BYTES = 8 * 1024 * 1024;

/**
 * How many connections may do so at once. Each linger turns up to LINGER_BYTES into garbage that V8 collects only
 * when it has a few dozen MiB of it: 600 unauthenticated 1 MB bodies took the process 87 MiB over idle without a
 * cap, 17 with one (BENCHMARKS.md, issue 25, item 5). Past it an early answer closes its connection instead, as a
 * body refused by the budget does.
 */
const MAX_LINGERING = 16;

export interface NodeEdge {
  /** Serves one request (the request listener of both Node servers). */
  handle(req: NodeRequest, res: NodeResponse): void;
  /**
   * Serves an HTTP/2 stream itself when it is a binary gRPC call of one of the registry's unary RPCs (the lean
   * gRPC path, without Node's compatibility request and response); false for any other stream, which the
   * caller hands on to `handle` through them.
   */
  handleStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, rawHeaders?: readonly string[]): boolean;
  /**
   * Stops keeping HTTP/1.1 connections alive: answers not yet started close
   * their connection, and later requests are refused with 503 (HTTP/2 drains by GOAWAY).
   */
  drain(): void;
}

/** The Node request as the edge reads it; its body is read through `share` of the body budget. */
function edgeRequest(req: NodeRequest, res: NodeResponse, share: BodyShare): EdgeRequest {
  // A Readable's iterator destroys the stream when left early (a 413): keep it, so the answer still reaches the client.
  const body = (): AsyncIterable<Uint8Array> => share.count(req.iterator({ destroyOnReturn: false }));
  const signal = clientLeft(res);
  return {
    method: req.method ?? "GET",
    target: req.url ?? "/",
    header: (name) => headerOf(req.headers, name),
    headers: () => headerRecord(req.headers),
    headerRepeated: (name) => repeatedIn(req.rawHeaders, name),
    body,
    bodyBytes: (limit) => bodyBytes(req, share, limit),
    universal: (contextValues) => universalRequest(req, contextValues, rpcErrors(body()), signal),
    addresses: () => socketAddresses(() => req.socket),
    authority: () => authorityOf(req.headers, req.rawHeaders),
    clientGone: () => clientGone(req, res),
    signal,
    http1: req.httpVersionMajor === 1,
  };
}

/**
 * The whole body of `req`, read by its events (for a small body, as a gRPC message is, far cheaper than an
 * async iterator), counted by `share`; undefined past `limit`, the rest left unread (the stream paused).
 */
function bodyBytes(req: Readable, share: BodyShare, limit: number): Promise<Uint8Array | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = (): void => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("aborted", onAborted);
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.byteLength;
      try {
        if (size > limit) {
          stop();
          req.pause();
          resolve(undefined);
          return;
        }
        share.counted(size);
        chunks.push(chunk);
      } catch (err) {
        stop();
        req.pause();
        reject(err);
      }
    };
    const onEnd = (): void => {
      stop();
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size));
    };
    const onError = (err: Error): void => {
      stop();
      reject(err);
    };
    const onAborted = (): void => onError(new ConnectError("The client closed the request mid-body.", Code.Canceled));
    try {
      share.counted(0);
    } catch (err) {
      reject(err);
      return;
    }
    // A body that ended with its headers may have ended before anyone listened (an HTTP/2 stream does): nothing
    // is left to read.
    if (req.readableEnded) {
      resolve(new Uint8Array(0));
      return;
    }
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", onError);
    req.once("aborted", onAborted);
  });
}

/** A header's value in Node's header object, repeated ones joined; undefined when absent. */
function headerOf(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(", ") : value;
}

/**
 * Whether the lower-case `name` comes more than once in `rawHeaders` (name, value, name, value... as received);
 * false when the runtime gives none.
 */
function repeatedIn(rawHeaders: readonly string[] | undefined, name: string): boolean {
  if (rawHeaders === undefined) return false;
  let seen = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const key = rawHeaders[i] as string;
    if (key.length !== name.length || key.toLowerCase() !== name) continue;
    if (seen) return true;
    seen = true;
  }
  return false;
}

/** Node's header object as a record: lower-case names, no pseudo-headers, repeated ones joined. */
function headerRecord(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of Object.keys(headers)) {
    const value = headerOf(headers, name);
    if (value !== undefined && !name.startsWith(":")) out[name] = value;
  }
  return out;
}

/** The request's share of the body budget, its declared Content-Length reserved up to the body limit. */
function bodyShare(app: App, headers: IncomingHttpHeaders): BodyShare {
  const length = Number(headers["content-length"]);
  return app.bodyBudget.share(
    Number.isSafeInteger(length) && length >= 0 ? length : undefined,
    app.config.maxBodyBytes,
  );
}

/** Why a request's signal aborts when its client leaves before the answer was sent. */
function clientLeftReason(): ConnectError {
  return new ConnectError("The client closed the request before it was answered.", Code.Canceled);
}

/**
 * `body`, its registry errors (the budget's OVERLOADED) turned into the ConnectError Connect answers in the
 * request's protocol.
 */
async function* rpcErrors(body: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  try {
    yield* body;
  } catch (err) {
    throw err instanceof RegistryError ? toConnectError(err) : err;
  }
}

/** The connection a request came on: an HTTP/2 request's session, an HTTP/1.1 request's socket. */
function connectionOf(req: NodeRequest): object {
  return (req as Partial<Http2ServerRequest>).stream?.session ?? req.socket;
}

/**
 * A signal that aborts when the client goes away before its answer was sent:
 * an HTTP/1.1 connection closed, an HTTP/2 stream reset. Not when the answer
 * is complete (then nothing waits for work any more anyway).
 */
function clientLeft(res: NodeResponse): AbortSignal {
  const controller = new AbortController();
  res.once("close", () => {
    // An HTTP/2 stream the client reset reads writableFinished (its stream is done), but was never ended.
    if (!res.writableFinished || !res.writableEnded) controller.abort(clientLeftReason());
  });
  return controller.signal;
}

/**
 * Whether the client gave up on its request: an HTTP/1.1 connection closed
 * mid-body (Node marks the request aborted), or an HTTP/2 stream reset with an
 * error code. A stream whose request and answer both ended is closed without
 * one, so a reset means someone left while it was open (Node ends the body of
 * a reset stream as if it were whole, so the body cannot tell). Read from the
 * connection's state, never from an error's message.
 */
function requestCutOff(req: NodeRequest): boolean {
  if ((req as { aborted?: boolean }).aborted === true) return true;
  const stream = (req as Partial<Http2ServerRequest>).stream;
  return (
    stream !== undefined && (stream.rstCode ?? http2Constants.NGHTTP2_NO_ERROR) !== http2Constants.NGHTTP2_NO_ERROR
  );
}

/** Whether the client closed the request before its answer was complete (a failure then is no fault of the service). */
function clientGone(req: NodeRequest, res: NodeResponse): boolean {
  return requestCutOff(req) || (res.destroyed && !res.writableFinished);
}

/**
 * The request in Connect's universal form. Not connect-node's
 * universalRequestFromNodeRequest: that one aborts its signal when every
 * request ends, successful or not, and an abort without a reason builds a
 * DOMException with a stack (6 % of the server's CPU on Connect GETs in the
 * profile). Here the signal (clientLeft) aborts only when the client went away
 * before the answer was sent, which is what a handler needs to know.
 */
function universalRequest(
  req: NodeRequest,
  contextValues: ContextValues,
  body: AsyncIterable<Uint8Array>,
  signal: AbortSignal,
): UniversalServerRequest {
  contextValues.set(connectionKey, connectionOf(req));
  const header = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name.startsWith(":")) continue;
    if (Array.isArray(value)) for (const v of value) header.append(name, v);
    else header.set(name, value);
  }
  return {
    httpVersion: req.httpVersion,
    method: req.method ?? "GET",
    // The origin is fixed: only the path and query are used, so a forged Host header changes nothing.
    url: `http://localhost${req.url ?? "/"}`,
    header,
    body,
    signal,
    contextValues,
  };
}

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
function writeAll(
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
function chunkedSocket(out: ServerResponse): Socket | undefined {
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
function drainedOrClosed(writable: NodeJS.EventEmitter): Promise<void> {
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
async function writeStreamAnswer(res: NodeResponse, answer: StreamAnswer): Promise<void> {
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

/** Reads and drops what is left of an HTTP/1.1 request body after its answer, up to LINGER_BYTES, then cuts. */
function discardRest(req: NodeRequest): void {
  let discarded = 0;
  req.on("data", (chunk: Buffer) => {
    discarded += chunk.byteLength;
    if (discarded > LINGER_BYTES) req.socket.destroy();
  });
  req.resume();
}

export function createNodeEdge(app: App): NodeEdge {
  /** HTTP/1.1 answers in progress, to close their connections once they are sent. */
  const h1Answers = new Set<ServerResponse>();
  /** Connections reading on and dropping the rest of a body answered early (at most MAX_LINGERING). */
  let lingering = 0;
  /** Whether `req`, answered before its body ended, may read the rest on; counted until it ends or closes. */
  const mayLinger = (req: NodeRequest): boolean => {
    if (lingering >= MAX_LINGERING) return false;
    lingering++;
    let counted = true;
    const done = (): void => {
      if (!counted) return;
      counted = false;
      lingering--;
      req.off("end", done);
      req.socket.off("close", done);
    };
    req.once("end", done);
    req.socket.once("close", done);
    return true;
  };
  let draining = false;

  const handle = (req: NodeRequest, res: NodeResponse): void => {
    const header = req.headers["x-request-id"];
    const record = app.requests.start({
      method: req.method ?? "GET",
      path: (req.url ?? "/").split("?", 1)[0] ?? "/",
      requestIdHeader: Array.isArray(header) ? header[0] : header,
    });
    res.setHeader("x-request-id", record.id);
    const h1 = req.httpVersionMajor === 1 ? (res as ServerResponse) : undefined;
    if (h1 !== undefined) h1Answers.add(h1);
    const grpcStatus = watchGrpcStatus(res);
    const share = bodyShare(app, req.headers);
    // The request is over once its answer is sent or its stream closed, however it ended (answered, failed,
    // the client gone): its body bytes go back to the budget. (An HTTP/2 stream whose client has not ended
    // its body closes only later.)
    res.once("finish", share.release);
    res.once("close", () => {
      share.release();
      if (h1 !== undefined) h1Answers.delete(h1);
      const status = grpcStatus();
      // An HTTP/2 client that resets its stream mid-request may see its answer "finish" into the closed
      // stream: it left all the same.
      const completed = res.writableFinished && !requestCutOff(req);
      app.requests.finish(record, {
        status: res.statusCode,
        completed,
        wireCode: status === undefined ? undefined : codeName(status),
      });
    });
    if (h1 !== undefined && draining) {
      record.protocol = "http";
      // The request body, if any, is not read: the connection closes after the answer.
      h1.setHeader("connection", "close");
      writeAnswer(h1, errorAnswer(shuttingDown()));
      return;
    }
    app
      .edge(edgeRequest(req, res, share), record)
      .then(async (answer) => {
        // A body refused for want of memory is not read on: the connection closes after the answer (HTTP/1.1),
        // the stream is reset without error once it is sent (HTTP/2, RFC 9113 §8.1), so the client stops sending.
        if (share.refused) {
          if (h1 !== undefined) h1.setHeader("connection", "close");
          else res.once("finish", () => (req as Http2ServerRequest).stream.close(http2Constants.NGHTTP2_NO_ERROR));
        }
        // Answered before its body ended (a 401, a 413): the rest is read on and dropped, so that a client still
        // sending gets the answer, unless MAX_LINGERING connections already do; then the connection closes.
        const linger = h1 !== undefined && !req.complete && !share.refused && mayLinger(req);
        if (h1 !== undefined && !req.complete && !share.refused && !linger) h1.setHeader("connection", "close");
        if (answer.rpc !== undefined) await universalResponseToNodeResponse(answer.rpc, res);
        else if (answer.stream !== undefined) await writeStreamAnswer(res, answer.stream);
        else writeAnswer(res, answer.http);
        if (linger && !req.complete) discardRest(req);
      })
      .catch((err: unknown) => {
        // The client went away, or the answer could not be written: nothing is left to tell it.
        // (An HTTP/2 answer has no `destroyed` of its own: its stream tells, destroyed when the client left.)
        const streamGone = (res as Partial<Http2ServerResponse>).stream?.destroyed === true;
        if (res.headersSent || res.destroyed || streamGone) return void res.destroy();
        writeAnswer(res, errorAnswer(callerError(err, app.logger, record.rpc ?? record.path, { record })));
      });
  };

  /** A binary gRPC call served from its HTTP/2 stream: what `handle` does, without the compatibility layer. */
  const handleStream = (
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    rawHeaders?: readonly string[],
  ): boolean => {
    const target = headers[":path"] ?? "/";
    const q = target.indexOf("?");
    const path = q === -1 ? target : target.slice(0, q);
    if (headers[":method"] !== "POST" || !app.leanGrpcPaths.has(path) || !isBinaryGrpc(headers["content-type"]))
      return false;
    // A stream the client resets with an error code is destroyed with an error: without a listener it would
    // be the process's (the compatibility layer listens for its own streams). The close below tells what happened.
    stream.on("error", ignore);
    const record = app.requests.start({ method: "POST", path, requestIdHeader: headerOf(headers, "x-request-id") });
    const req = new StreamRequest(target, stream, headers, bodyShare(app, headers), rawHeaders);
    stream.once("close", () => {
      req.share.release();
      const completed = req.answered && !req.reset();
      if (!completed) req.left();
      app.requests.finish(record, {
        status: 200,
        completed,
        wireCode: req.grpcStatus === undefined ? undefined : codeName(Number(req.grpcStatus)),
      });
    });
    app.edge(req, record).then(({ http: answer, stream: streaming }) => {
      if (streaming !== undefined) return void writeGrpcStream(req, record.id, streaming).catch(failed);
      if (answer === undefined || stream.destroyed) return void stream.destroy();
      // Before respond: an answer that fails to be written is logged with the code it carried.
      req.grpcStatus = answer.trailers?.["grpc-status"];
      const head = { ":status": answer.status, "x-request-id": record.id, ...answer.headers };
      // A body refused for want of memory is not read on. The stream is not reset after the answer, as the
      // compatibility path does: a reset right after the trailers reaches the client before them (Node sends
      // RST_STREAM once the writable side finishes, before it asks for the trailers). Unread, the stream's
      // flow control stops the client within one window, and a gRPC client ends the call on the trailers;
      // HTTP_BODY_TIMEOUT_MS cancels what a client keeps open.
      try {
        stream.respond(head, { waitForTrailers: true });
        req.endWith(answer.trailers ?? {}, answer.body ?? undefined);
      } catch (err) {
        failed(err);
      }
    }, failed);
    return true;

    /** The answer could not be made or written: the stream is reset, the failure logged unless the client left. */
    function failed(err: unknown): void {
      if (!req.clientGone()) callerError(err, app.logger, record.rpc ?? path, { record });
      stream.destroy();
    }
  };

  return {
    handle,
    handleStream,
    drain() {
      draining = true;
      for (const res of h1Answers) if (!res.headersSent) res.setHeader("connection", "close");
    },
  };
}

/** A binary gRPC call's HTTP/2 stream as the edge reads it (handleStream): one object, its methods shared. */
class StreamRequest implements EdgeRequest {
  readonly method = "POST";
  /**
   * The call's signal's controller, made when the signal is first read (a GET or a POST reads none: only a list
   * and a watch stop on it); aborted when the stream closes before its answer was sent.
   */
  #controller: AbortController | undefined;
  /** Whether the client left before the answer was sent. */
  #left = false;
  /** Whether the answer was handed to the stream whole (its trailers asked for). */
  answered = false;
  /** The `grpc-status` the answer ends with, once known. */
  grpcStatus: string | undefined;

  constructor(
    readonly target: string,
    readonly stream: ServerHttp2Stream,
    private readonly headerObject: IncomingHttpHeaders,
    readonly share: BodyShare,
    private readonly rawHeaders: readonly string[] | undefined,
  ) {}

  header(name: string): string | undefined {
    return headerOf(this.headerObject, name);
  }
  headers(): Record<string, string> {
    return headerRecord(this.headerObject);
  }
  headerRepeated(name: string): boolean {
    return repeatedIn(this.rawHeaders, name);
  }
  body(): AsyncIterable<Uint8Array> {
    return this.share.count(this.stream.iterator({ destroyOnReturn: false }));
  }
  bodyBytes(limit: number): Promise<Uint8Array | undefined> {
    return bodyBytes(this.stream, this.share, limit);
  }
  universal(): never {
    throw new Error("A binary gRPC call of a registry RPC is served by the lean gRPC path, not Connect's router.");
  }
  addresses(): RequestAddresses {
    return socketAddresses(() => this.stream.session?.socket);
  }
  authority(): string | undefined {
    return authorityOf(this.headerObject);
  }
  /** Whether the client reset the stream with an error code. */
  reset(): boolean {
    return (this.stream.rstCode ?? http2Constants.NGHTTP2_NO_ERROR) !== http2Constants.NGHTTP2_NO_ERROR;
  }
  clientGone(): boolean {
    return this.reset() || (this.stream.destroyed && !this.answered);
  }
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#left) this.#controller.abort(clientLeftReason());
    }
    return this.#controller.signal;
  }
  /**
   * Ends the answer (the last of its body, if any) and sends `trailers` once the body is out; from here the call
   * counts as answered, with the trailers' `grpc-status`. The stream's headers were sent with waitForTrailers.
   */
  endWith(trailers: Record<string, string>, body?: Uint8Array): void {
    this.grpcStatus = trailers["grpc-status"];
    pendingTrailers.set(this.stream, trailers);
    this.stream.on("wantTrailers", sendPendingTrailers);
    this.answered = true;
    this.stream.end(body);
  }
  /** The client left before the answer was sent: the signal aborts, now or when it is made. */
  left(): void {
    this.#left = true;
    this.#controller?.abort(clientLeftReason());
  }
}

/** A listener that does nothing (shared: a stream's errors are read from its close). */
function ignore(): void {}

/** The trailers each answered stream sends once its body is out. */
const pendingTrailers = new WeakMap<ServerHttp2Stream, Record<string, string>>();

/** A stream's `wantTrailers` listener (shared, `this` is the stream): sends the trailers its answer left. */
function sendPendingTrailers(this: ServerHttp2Stream): void {
  this.sendTrailers(pendingTrailers.get(this) ?? {});
}

/**
 * The lean gRPC watch's answer: headers at once, each chunk as it comes (waiting while the client's window is
 * full), then the trailers. Only a stream that ended with its trailers was answered: any earlier close (a reset,
 * a connection gone) aborts the call's signal, which ends the watch.
 */
async function writeGrpcStream(req: StreamRequest, requestId: string, streaming: StreamAnswer): Promise<void> {
  const { stream } = req;
  stream.respond(
    { ":status": streaming.status, "x-request-id": requestId, ...streaming.headers },
    { waitForTrailers: true },
  );
  for await (const chunks of streaming.body) {
    if (stream.destroyed) break;
    if (!writeAll(stream, chunks)) await drainedOrClosed(stream);
  }
  if (stream.destroyed) return;
  req.endWith(streaming.trailers());
}

/**
 * The `grpc-status` a gRPC answer ends with, read as connect-node hands its
 * trailers to the response: the one place a failure before the interceptors
 * (an unreadable message) shows its code.
 */
function watchGrpcStatus(res: NodeResponse): () => number | undefined {
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
