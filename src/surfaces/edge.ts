/**
 * The edge: what every request needs, done once, whichever runtime received
 * it and whichever surface it speaks. It finds what serves the request (an
 * RPC by its exact path, a plain endpoint, a REST binding), authenticates the
 * caller and admits it to the operation before any body is read, and hands
 * the request on with that verdict: binary gRPC calls and Connect unary POSTs
 * of the registry's RPCs and REST to the pipeline (src/surfaces/pipeline/pipeline.ts), the
 * other RPCs (gRPC-Web, Connect GET, gRPC's JSON, health, reflection) to
 * Connect's router. The runtime adapter
 * (node-edge.ts, under Node and Deno alike) only translates requests and answers.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import {
  type ConnectRouter,
  type ConnectRouterOptions,
  type ContextValues,
  createConnectRouter,
} from "@connectrpc/connect";
import type {
  Compression,
  UniversalHandler,
  UniversalServerRequest,
  UniversalServerResponse,
} from "@connectrpc/connect/protocol";
import type { Authenticator } from "../auth/authenticator.js";
import type { Principal } from "../auth/principal.js";
import type { TokenRechecks } from "../auth/token-rechecks.js";
import type { Catalog } from "../catalog/catalog.js";
import { noResourceAt, repeatedHeader } from "../domain/errors.js";
import { errorAnswer, type HttpAnswer, methodNotAllowedAnswer, type StreamAnswer } from "../http/http-answer.js";
import type { HttpEndpoint } from "../http/http-endpoint.js";
import type { Logger } from "../logger.js";
import { type RequestRecord, requestValues, rpcProtocolOf } from "../observability/request-record.js";
import { type Admission, admit, type Call, type Operation, type Operations } from "../operations/operation.js";
import { connectUnaryFormat } from "./connect/request.js";
import { serveConnect } from "./connect/unary.js";
import { isBinaryGrpc } from "./grpc/request.js";
import { serveGrpcStream } from "./grpc/stream.js";
import { serveGrpc } from "./grpc/unary.js";
import { callerError } from "./pipeline/failures.js";
import { createMessageCheck, type MessageCheck } from "./pipeline/message-check.js";
import { type LeanOptions, procedureOf } from "./pipeline/pipeline.js";
import type { RestSurface } from "./rest/surface.js";
import { verdictKey } from "./router/routes.js";

/** A request as the edge reads it, whichever runtime received it. */
export interface EdgeRequest {
  readonly method: string;
  /** The request target as sent: path and query. */
  readonly target: string;
  /** A header's value by its lower-case name; undefined when absent. */
  header(name: string): string | undefined;
  /** Every header by its lower-case name (no HTTP/2 pseudo-headers; repeated ones joined by ", "). */
  headers(): Record<string, string>;
  /**
   * Whether the header (lower-case name) came more than once, as sent: `header` cannot tell, since Node keeps
   * only the first of some (`authorization` among them) on HTTP/1.1 and HTTP/2 alike.
   */
  headerRepeated(name: string): boolean;
  /** The body, as it arrives; read at most once. */
  body(): AsyncIterable<Uint8Array>;
  /**
   * The whole body in one piece, when it is at most `limit` bytes (undefined when longer: the rest is left
   * unread); read at most once, instead of `body()`. Throws the body budget's OVERLOADED, or when the client
   * goes away mid-body.
   */
  bodyBytes(limit: number): Promise<Uint8Array | undefined>;
  /** The request in Connect's universal form, for the RPC router. */
  universal(contextValues: ContextValues): UniversalServerRequest;
  /** The addresses of the connection it came on, as its socket says (the development sign-in reads them). */
  addresses(): RequestAddresses;
  /**
   * The authority it was sent to: HTTP/2's `:authority`, HTTP/1.1's `Host`; undefined when it has none or two
   * that differ (a repeated `Host`, an HTTP/2 `host` header naming another authority than `:authority`).
   */
  authority(): string | undefined;
  /**
   * Whether the client has closed the request before its answer was sent (a failure then is no fault of the
   * service).
   */
  clientGone?(): boolean;
  /**
   * Aborts when the client goes away before its answer was sent (a closed
   * connection, a reset stream): the operation's work stops with it (Call.signal).
   */
  readonly signal?: AbortSignal | undefined;
  /** The request came on an HTTP/1.x connection (Call.http1): a stream's answer holds it while it lasts. */
  readonly http1?: boolean | undefined;
}

/** A connection's own address and its peer's (IP addresses as the socket gives them); undefined when not known. */
export interface RequestAddresses {
  readonly local: string | undefined;
  readonly remote: string | undefined;
}

/** An answer: Connect's, for an RPC, a plain HTTP one, or a stream's (a watch: SSE, the lean gRPC watch). */
export type EdgeAnswer =
  | { readonly rpc: UniversalServerResponse; readonly http?: undefined; readonly stream?: undefined }
  | { readonly http: HttpAnswer; readonly rpc?: undefined; readonly stream?: undefined }
  | { readonly stream: StreamAnswer; readonly rpc?: undefined; readonly http?: undefined };

export interface EdgeOptions {
  readonly authenticator: Authenticator;
  /** Where a stream follows its caller's token (WATCH_TOKEN_RECHECK_MS); without it a token is checked once. */
  readonly rechecks?: TokenRechecks;
  readonly operations: Operations;
  /** Every Connect route: the registry's RPCs and the tools' (health, reflection). */
  readonly routes: (router: ConnectRouter) => void;
  /** Options of Connect's router (limits, compression) for this runtime. */
  readonly routerOptions: ConnectRouterOptions;
  readonly rest: RestSurface;
  readonly endpoints: readonly HttpEndpoint[];
  readonly maxBodyBytes: number;
  readonly logger: Logger;
  /**
   * The registry's unary RPCs by request path: binary gRPC calls (grpc-unary.ts) and Connect unary POSTs
   * (connect-unary.ts) of them are served through the pipeline, the rest by Connect's router.
   */
  readonly unary?: ReadonlyMap<string, DescMethod>;
  /**
   * The registry's server-streaming RPCs by request path: binary gRPC calls of them are served by the lean gRPC
   * watch (grpc-stream.ts), the rest by Connect's router.
   */
  readonly streams?: ReadonlyMap<string, DescMethod>;
  /** The compressions and threshold of the RPCs the edge serves itself (the router's). */
  readonly lean?: LeanOptions;
  /** The catalog's pages at `/ui/` (and a browser's `/`), when served. */
  readonly catalog?: Catalog;
}

/** Serves one request; `record` is its access-log record, begun by the runtime adapter. */
export type Edge = (req: EdgeRequest, record: RequestRecord) => Promise<EdgeAnswer>;

export function createEdge(options: EdgeOptions): Edge {
  const { authenticator, operations, rest, logger } = options;
  const router = createConnectRouter(options.routerOptions);
  options.routes(router);
  const rpcs = new Map<string, UniversalHandler>(router.handlers.map((h) => [h.requestPath, h]));
  const endpoints = new Map(options.endpoints.map((e) => [e.path, e]));
  const checks = messageChecks(operations, options.maxBodyBytes, options.routerOptions.acceptCompression ?? []);

  /** Authentication (once per request) and the operation's policy, before any body is read. */
  const admitCaller = async (req: EdgeRequest, operation: Operation, record: RequestRecord): Promise<Admission> => {
    try {
      // Two tokens: which one speaks for the caller would be a guess (Node reads the first, a proxy may read the last).
      if (req.headerRepeated("authorization")) throw repeatedHeader("Authorization");
      const principal = await authenticator.authenticate(req.header("authorization") ?? null);
      admit(operation, principal);
      return { call: new EdgeCall(principal, record, req, options.rechecks) };
    } catch (err) {
      return { error: callerError(err, logger, procedureOf(operation), { record }) };
    }
  };

  const serveRpc = async (
    handler: UniversalHandler,
    req: EdgeRequest,
    record: RequestRecord,
  ): Promise<UniversalServerResponse> => {
    record.protocol = rpcProtocolOf(req.header("content-type"));
    const values = requestValues(record);
    const operation = operations.get(handler.method);
    // Health and reflection carry no registry data: no token.
    if (operation === undefined) return handler(req.universal(values));
    const check = checks.get(handler.method) as MessageCheck;
    const admission = await admitCaller(req, operation, record);
    if (admission.error !== undefined) {
      values.set(verdictKey, { error: admission.error });
      return handler(check.withoutMessage(req.universal(values)));
    }
    const { request, problem } = await check.check(req.universal(values));
    values.set(verdictKey, problem === undefined ? { call: admission.call } : { error: problem });
    return handler(request);
  };

  /** A request of a REST route, through the pipeline; undefined when the path is not part of the REST surface. */
  const serveRest = async (
    req: EdgeRequest,
    pathname: string,
    query: string,
    record: RequestRecord,
  ): Promise<EdgeAnswer | undefined> => {
    const match = rest.match(req.method, pathname);
    if (match === undefined) return undefined;
    record.protocol = "rest";
    if (match.route === undefined) return { http: methodNotAllowedAnswer(req.method, match.allowed) };
    record.rpc = procedureOf(match.operation);
    const admission = await admitCaller(req, match.operation, record);
    return rest.serve(match, {
      operation: match.operation,
      admission,
      record,
      pathname,
      query,
      header: (name) => req.header(name),
      body: () => req.body(),
      clientGone: () => req.clientGone?.() === true,
      http1: req.http1 === true,
    });
  };

  /** The caller's admission and the reading of the one message of a call of `method` the edge serves itself. */
  const rpcCall = async (
    req: EdgeRequest,
    method: DescMethod,
    record: RequestRecord,
    connect?: { binary: boolean },
  ) => {
    record.protocol = rpcProtocolOf(req.header("content-type"));
    const operation = operations.get(method) as Operation;
    const check = checks.get(method) as MessageCheck;
    const read = (limit: number) => req.bodyBytes(limit);
    const length = req.header("content-length");
    return {
      operation,
      admission: await admitCaller(req, operation, record),
      record,
      header: (name: string) => req.header(name),
      signal: req.signal,
      message: (compression: Compression | null) =>
        connect === undefined
          ? check.grpcMessage(read, length, compression)
          : check.connectMessage(read, length, compression, connect.binary),
    };
  };

  /** The RPC the edge serves itself, if it serves `req`: a binary gRPC or Connect unary POST of a registry RPC. */
  const leanAnswer = (req: EdgeRequest, pathname: string, record: RequestRecord): Promise<EdgeAnswer> | undefined => {
    const lean = options.lean;
    if (req.method !== "POST" || lean === undefined) return undefined;
    const contentType = req.header("content-type");
    const unary = options.unary?.get(pathname);
    if (unary !== undefined) {
      if (isBinaryGrpc(contentType))
        return rpcCall(req, unary, record).then(async (call) => ({ http: await serveGrpc(call, lean) }));
      const connect = connectUnaryFormat(contentType);
      if (connect === undefined) return undefined;
      return rpcCall(req, unary, record, connect).then(async (call) => ({
        http: await serveConnect(call, connect.binary, lean),
      }));
    }
    const stream = options.streams?.get(pathname);
    if (stream === undefined || !isBinaryGrpc(contentType)) return undefined;
    // The lean gRPC watch: a binary gRPC POST of a registry server-streaming RPC.
    return rpcCall(req, stream, record).then(async (call) => ({ stream: await serveGrpcStream(call, lean) }));
  };

  return async (req, record) => {
    const q = req.target.indexOf("?");
    const pathname = q === -1 ? req.target : req.target.slice(0, q);
    const lean = leanAnswer(req, pathname, record);
    if (lean !== undefined) return lean;
    const rpc = rpcs.get(pathname);
    if (rpc !== undefined) return { rpc: await serveRpc(rpc, req, record) };
    const endpoint = endpoints.get(pathname);
    if (endpoint !== undefined) {
      record.protocol = "http";
      record.endpoint = endpoint.path;
      return { http: await endpoint.handle(req.method) };
    }
    // The catalog's paths only: no await on the way to REST for the API's own requests.
    const catalog = options.catalog;
    const page =
      catalog !== undefined && (pathname === "/" || catalog.serves(pathname))
        ? await catalog.answer(req, pathname)
        : undefined;
    if (page !== undefined) {
      record.protocol = "http";
      record.endpoint = "/ui/";
      return { http: page };
    }
    const answer = await serveRest(req, pathname, q === -1 ? "" : req.target.slice(q + 1), record);
    if (answer !== undefined) return answer;
    record.protocol = "http";
    return { http: errorAnswer(noResourceAt(pathname)) };
  };
}

/**
 * An admitted caller's call: its request's signal read only when the operation reads it (a list, a watch): an
 * adapter may make the signal only then (node-edge.ts's StreamRequest does).
 */
class EdgeCall implements Call {
  /** An own property, not a method: the lean gRPC watch spreads the call (grpc-stream.ts). */
  readonly followToken: Call["followToken"];
  constructor(
    readonly principal: Principal,
    readonly record: RequestRecord,
    private readonly req: EdgeRequest,
    rechecks: TokenRechecks | undefined,
  ) {
    // The header read only when a stream follows its token: a unary call never does.
    this.followToken =
      rechecks === undefined ? undefined : (onRefused) => rechecks.follow(req.header("authorization") ?? "", onRefused);
  }
  get signal(): AbortSignal | undefined {
    return this.req.signal;
  }
  get http1(): boolean | undefined {
    return this.req.http1;
  }
}

/**
 * The message check of every operation's RPC. Compressed messages are inflated
 * by the check with the router's own compressions, so they pass the same guard.
 */
function messageChecks(
  operations: Operations,
  maxBodyBytes: number,
  compressions: readonly Compression[],
): Map<unknown, MessageCheck> {
  return new Map(
    [...operations.keys()].map((method) => [method, createMessageCheck(method, maxBodyBytes, compressions)]),
  );
}
