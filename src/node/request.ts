/**
 * A Node request as the edge reads it (EdgeRequest), for HTTP/1.1 and HTTP/2 alike: no copies (headers are read
 * where Node keeps them, the body is the request stream, read through the request's share of the body budget),
 * a signal that aborts when the client leaves, and the request in Connect's universal form for the router.
 */
import { Buffer } from "node:buffer";
import type { IncomingMessage, ServerResponse } from "node:http";
import {
  type Http2ServerRequest,
  type Http2ServerResponse,
  constants as http2Constants,
  type IncomingHttpHeaders,
} from "node:http2";
import type { Readable } from "node:stream";
import { Code, ConnectError, type ContextValues } from "@connectrpc/connect";
import type { UniversalServerRequest } from "@connectrpc/connect/protocol";
import type { App } from "../app.js";
import { RegistryError } from "../domain/errors.js";
import type { BodyShare } from "../surfaces/body-budget.js";
import type { EdgeRequest } from "../surfaces/edge.js";
import { toConnectError } from "../surfaces/pipeline/rpc-errors.js";
import { connectionKey } from "../surfaces/router/connection.js";
import { authorityOf, socketAddresses } from "./request-origin.js";

/** A request of either Node server. */
export type NodeRequest = IncomingMessage | Http2ServerRequest;
/** An answer of either Node server. */
export type NodeResponse = ServerResponse | Http2ServerResponse;

/** The Node request as the edge reads it; its body is read through `share` of the body budget. */
export function edgeRequest(req: NodeRequest, res: NodeResponse, share: BodyShare): EdgeRequest {
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
export function bodyBytes(req: Readable, share: BodyShare, limit: number): Promise<Uint8Array | undefined> {
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
export function headerOf(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(", ") : value;
}

/**
 * Whether the lower-case `name` comes more than once in `rawHeaders` (name, value, name, value... as received);
 * false when the runtime gives none.
 */
export function repeatedIn(rawHeaders: readonly string[] | undefined, name: string): boolean {
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
export function headerRecord(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of Object.keys(headers)) {
    const value = headerOf(headers, name);
    if (value !== undefined && !name.startsWith(":")) out[name] = value;
  }
  return out;
}

/** The request's share of the body budget, its declared Content-Length reserved up to the body limit. */
export function bodyShare(app: App, headers: IncomingHttpHeaders): BodyShare {
  const length = Number(headers["content-length"]);
  return app.bodyBudget.share(
    Number.isSafeInteger(length) && length >= 0 ? length : undefined,
    app.config.maxBodyBytes,
  );
}

/** Why a request's signal aborts when its client leaves before the answer was sent. */
export function clientLeftReason(): ConnectError {
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
export function requestCutOff(req: NodeRequest): boolean {
  if ((req as { aborted?: boolean }).aborted === true) return true;
  const stream = (req as Partial<Http2ServerRequest>).stream;
  return (
    stream !== undefined && (stream.rstCode ?? http2Constants.NGHTTP2_NO_ERROR) !== http2Constants.NGHTTP2_NO_ERROR
  );
}

/** Whether the client closed the request before its answer was complete (a failure then is no fault of the service). */
export function clientGone(req: NodeRequest, res: NodeResponse): boolean {
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
