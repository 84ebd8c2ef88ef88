/**
 * The Node adapter of the edge (src/surfaces/edge.ts), for HTTP/1.1 and HTTP/2 alike: it begins each request's
 * record, hands the edge a view of the Node request (request.ts), and writes what the edge answers (answer.ts):
 * Connect's answer through connect-node, a stream's chunk by chunk, a plain answer in one `writeHead` + `end`.
 * Binary gRPC calls of the registry's RPCs skip Node's compatibility layer (h2-stream.ts).
 */
import type { ServerResponse } from "node:http";
import {
  type Http2ServerRequest,
  type Http2ServerResponse,
  constants as http2Constants,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from "node:http2";
import { universalResponseToNodeResponse } from "@connectrpc/connect-node";
import type { App } from "../app.js";
import { shuttingDown } from "../domain/errors.js";
import { errorAnswer } from "../http/http-answer.js";
import { codeName, type RequestRecord } from "../observability/request-record.js";
import { callerError } from "../surfaces/pipeline/failures.js";
import { watchGrpcStatus, writeAnswer, writeStreamAnswer } from "./answer.js";
import { createStreamHandler } from "./h2-stream.js";
import { bodyShare, edgeRequest, type NodeRequest, type NodeResponse, requestCutOff } from "./request.js";

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
   * Serves an HTTP/2 stream itself when it is a binary gRPC call of one of the registry's RPCs (h2-stream.ts,
   * without Node's compatibility request and response); false for any other stream, which the caller hands on
   * to `handle` through them.
   */
  handleStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, rawHeaders?: readonly string[]): boolean;
  /**
   * Stops keeping HTTP/1.1 connections alive: answers not yet started close
   * their connection, and later requests are refused with 503 (HTTP/2 drains by GOAWAY).
   */
  drain(): void;
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

/**
 * Whether a request answered before its body ended may read the rest on (at most MAX_LINGERING connections at
 * once); counted until it ends or closes.
 */
function createLingering(): (req: NodeRequest) => boolean {
  let lingering = 0;
  return (req) => {
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
}

/** Finishes `record` once `res` closes, however the request ended, after `onClose`. */
function finishOnClose(
  app: App,
  req: NodeRequest,
  res: NodeResponse,
  record: RequestRecord,
  onClose: () => void,
): void {
  const grpcStatus = watchGrpcStatus(res);
  res.once("close", () => {
    onClose();
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
}

/**
 * `answered` is told, with its connection, when an HTTP/1.1 request has its answer (the edge answered, or it
 * failed) or its connection closed first (early-watch-refusal.ts: its key's next request may then go).
 */
export function createNodeEdge(app: App, answered?: (connection: object) => void): NodeEdge {
  /** HTTP/1.1 answers in progress, to close their connections once they are sent. */
  const h1Answers = new Set<ServerResponse>();
  const mayLinger = createLingering();
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
    const done = h1 === undefined || answered === undefined ? undefined : () => answered(req.socket);
    const share = bodyShare(app, req.headers);
    // The request is over once its answer is sent or its stream closed, however it ended (answered, failed,
    // the client gone): its body bytes go back to the budget. (An HTTP/2 stream whose client has not ended
    // its body closes only later.)
    res.once("finish", share.release);
    finishOnClose(app, req, res, record, () => {
      done?.();
      share.release();
      if (h1 !== undefined) h1Answers.delete(h1);
    });
    if (h1 !== undefined && draining) {
      record.protocol = "http";
      // The request body, if any, is not read: the connection closes after the answer.
      h1.setHeader("connection", "close");
      writeAnswer(h1, errorAnswer(shuttingDown()));
      return;
    }
    const edged = app.edge(edgeRequest(req, res, share), record);
    // Told first, before the answer is written.
    if (done !== undefined) edged.then(done, done);
    edged
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

  return {
    handle,
    handleStream: createStreamHandler(app),
    drain() {
      draining = true;
      for (const res of h1Answers) if (!res.headersSent) res.setHeader("connection", "close");
    },
  };
}
