/**
 * What a door of the edge is (edge.ts): it says whether it serves a request
 * (`matches`, from what the request's line and headers say, before any body)
 * and serves it (`serve`). Here too: the request as every door reads it,
 * whichever runtime received it, the answer every door gives, and what the
 * edge lends each door: the caller's admission, before any body is read.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import type { ContextValues } from "@connectrpc/connect";
import type { UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import type { HttpAnswer, StreamAnswer } from "../../http/http-answer.js";
import { type RequestRecord, rpcProtocolOf } from "../../observability/request-record.js";
import type { Admission, Operation, Operations } from "../../operations/operation.js";
import type { MessageCheck, MessageChecks } from "./message-check.js";
import type { BodyRead } from "./message-decoder.js";
import type { PipelineCall, RpcCall, RpcMessage } from "./pipeline.js";

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

/** The registry's base URL as `req` reached it: PUBLIC_URL, else `http://` and the authority it was sent to. */
export function publicBaseOf(req: EdgeRequest, publicUrl: string | undefined): string {
  return publicUrl ?? `http://${req.authority() ?? "localhost"}`;
}

/** A connection's own address and its peer's (IP addresses as the socket gives them); undefined when not known. */
export interface RequestAddresses {
  readonly local: string | undefined;
  readonly remote: string | undefined;
}

/** An answer: Connect's, for an RPC, a plain HTTP one, or a stream's (a watch: SSE, the gRPC watch). */
export type EdgeAnswer =
  | { readonly rpc: UniversalServerResponse; readonly http?: undefined; readonly stream?: undefined }
  | { readonly http: HttpAnswer; readonly rpc?: undefined; readonly stream?: undefined }
  | { readonly stream: StreamAnswer; readonly rpc?: undefined; readonly http?: undefined };

/** The request target split once: its path and its query (without the `?`). */
export interface RequestTarget {
  readonly pathname: string;
  readonly query: string;
}

/** `target` (path and query) as a RequestTarget. */
export function requestTarget(target: string): RequestTarget {
  const q = target.indexOf("?");
  return q === -1 ? { pathname: target, query: "" } : { pathname: target.slice(0, q), query: target.slice(q + 1) };
}

/**
 * A door of the edge. `matches` answers what `serve` needs to know of a request it serves (a route, a method),
 * or undefined when it serves none of it; the edge asks its doors in order, and the first that matches serves.
 * `serve` may still answer undefined (the catalog's `/` for a caller that is not a browser): the next door is
 * asked then.
 */
export interface Door<Match> {
  /** For a reader and the architecture test: which door this is. */
  readonly name: string;
  matches(req: EdgeRequest, target: RequestTarget): Match | undefined;
  serve(req: EdgeRequest, match: Match, record: RequestRecord): Promise<EdgeAnswer | undefined>;
}

/** The edge's admission of a caller to an operation: authentication and policy, before any body is read. */
export type Admit = (
  req: EdgeRequest,
  operation: Operation,
  record: RequestRecord,
  /** Call.watchKey of the admitted call (REST's watch over HTTP/1.1). */
  watchKey?: string,
) => Promise<Admission>;

/** How a surface reads the one message of a call: the body, its declared length, the request's compression. */
export type ReadMessage = (
  body: BodyRead,
  contentLength: string | undefined,
  compression: RpcCompression,
) => Promise<RpcMessage>;

/** What an RPC door (gRPC's, Connect's) needs to admit a call of one of the registry's methods. */
export interface RpcDoorParts {
  readonly operations: Operations;
  readonly checks: MessageChecks;
  readonly admit: Admit;
}

/**
 * The call of `method` as an RPC door serves it: the request's protocol recorded, the caller admitted (or
 * refused) to the method's operation, its message read by the surface's `read` with the method's checks.
 */
export async function admittedRpcCall(
  req: EdgeRequest,
  method: DescMethod,
  { operations, checks, admit }: RpcDoorParts,
  record: RequestRecord,
  read: (check: MessageCheck) => ReadMessage,
): Promise<RpcCall> {
  record.protocol = rpcProtocolOf(req.header("content-type"));
  const operation = operations.get(method);
  if (operation === undefined) throw new Error(`${method.name} has no operation.`);
  return rpcCallOf(req, { operation, admission: await admit(req, operation, record), record }, read(checks(method)));
}

/**
 * The call of an RPC the edge serves itself, admitted (or refused), its one message read whole when the surface
 * asks for it by `read` (with the request's compression).
 */
function rpcCallOf(req: EdgeRequest, call: PipelineCall, read: ReadMessage): RpcCall {
  return new DoorCall(req, call, read);
}

/**
 * rpcCallOf's call: a class, not an object literal (a literal spreading the pipeline's call, with a getter, was
 * made in V8's slow mode at every call: 3 % of a gRPC call's CPU in the profile, and more garbage).
 */
class DoorCall implements RpcCall {
  readonly operation: PipelineCall["operation"];
  readonly admission: PipelineCall["admission"];
  readonly record: PipelineCall["record"];
  constructor(
    private readonly req: EdgeRequest,
    call: PipelineCall,
    private readonly read: ReadMessage,
  ) {
    this.operation = call.operation;
    this.admission = call.admission;
    this.record = call.record;
  }
  header(name: string): string | undefined {
    return this.req.header(name);
  }
  /** Read only when a stream reads it: an adapter may make the signal only then (node-edge.ts's StreamRequest). */
  get signal(): AbortSignal | undefined {
    return this.req.signal;
  }
  message(compression: RpcCompression): Promise<RpcMessage> {
    const { req } = this;
    return this.read((limit) => req.bodyBytes(limit), req.header("content-length"), compression);
  }
}

/** The compression of a request message (null: none). */
type RpcCompression = Parameters<RpcCall["message"]>[0];
