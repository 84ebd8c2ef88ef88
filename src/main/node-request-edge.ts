import type { ServerResponse } from "node:http";
import { type ContextValues, createContextValues } from "@connectrpc/connect";
import type { App } from "../app.js";
import { codeName, requestRecordKey, rpcProtocolOf } from "../observability/request-record.js";
import type { NodeHandlerArgs } from "./node-fetch-bridge.js";

type NodeRequest = NodeHandlerArgs[0];
type NodeResponse = NodeHandlerArgs[1];

/** What a draining server answers an HTTP/1.1 request with: the spec's 5xx error body. */
const DRAINING_BODY = JSON.stringify({ error: "The service is shutting down; retry on another instance.", code: "UNAVAILABLE" });

/**
 * Where a Node request meets the app's request tracking, for both HTTP/1.1
 * and HTTP/2: every request gets a record (its context values for the
 * Connect adapters and the plain HTTP handler), an `x-request-id` answer
 * header, and exactly one finish, whichever surface served it.
 */
export interface NodeRequestEdge {
  /**
   * Starts tracking a request. While draining, an HTTP/1.1 request is answered
   * 503 with `Connection: close` here and false is returned: do not serve it.
   */
  begin(req: NodeRequest, res: NodeResponse): boolean;
  /** The context values of a request begun here (the adapters' `contextValues` option). */
  contextValues(req: NodeRequest): ContextValues;
  /**
   * Stops keeping HTTP/1.1 connections alive: answers not yet started close
   * their connection, and later requests are refused (HTTP/2 drains by GOAWAY).
   */
  drain(): void;
}

export function createNodeRequestEdge(app: App): NodeRequestEdge {
  const values = new WeakMap<NodeRequest, ContextValues>();
  /** HTTP/1.1 answers in progress, to close their connections once they are sent. */
  const h1Answers = new Set<ServerResponse>();
  let draining = false;

  const begin = (req: NodeRequest, res: NodeResponse): boolean => {
    const header = req.headers["x-request-id"];
    const record = app.requests.start({
      method: req.method ?? "GET",
      path: (req.url ?? "/").split("?", 1)[0] ?? "/",
      requestIdHeader: Array.isArray(header) ? header[0] : header,
    });
    values.set(req, createContextValues().set(requestRecordKey, record));
    res.setHeader("x-request-id", record.id);
    const h1 = req.httpVersionMajor === 1 ? (res as ServerResponse) : undefined;
    if (h1 !== undefined) h1Answers.add(h1);
    const grpcStatus = watchGrpcStatus(res);
    res.once("close", () => {
      if (h1 !== undefined) h1Answers.delete(h1);
      // Only the RPC adapters leave the protocol unset; they matched on the content type.
      record.protocol ??= rpcProtocolOf(req.headers["content-type"]);
      const status = grpcStatus();
      app.requests.finish(record, { status: res.statusCode, completed: res.writableFinished, wireCode: status === undefined ? undefined : codeName(status) });
    });
    if (h1 === undefined || !draining) return true;
    record.protocol = "http";
    h1.writeHead(503, { "content-type": "application/json; charset=utf-8", connection: "close", "content-length": Buffer.byteLength(DRAINING_BODY) });
    h1.end(DRAINING_BODY);
    // The request body, if any, is not read: the connection closes after the answer.
    return false;
  };

  return {
    begin,
    contextValues(req) {
      const found = values.get(req);
      if (found === undefined) throw new Error("contextValues of a request the edge did not begin");
      return found;
    },
    drain() {
      draining = true;
      for (const res of h1Answers) if (!res.headersSent) res.setHeader("connection", "close");
    },
  };
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
