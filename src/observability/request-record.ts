import { Code, type ContextKey, type ContextValues, createContextKey } from "@connectrpc/connect";

/**
 * How a request reached the registry: the REST transcoder, an RPC protocol, or a plain HTTP endpoint (probes,
 * /metrics).
 */
export type Protocol = "rest" | "grpc" | "grpc-web" | "connect" | "http";

/**
 * What is known about one request, filled in as it travels: the runtime's edge
 * creates it, the REST handler and the RPC interceptors add what they learn
 * (the RPC, its outcome, the tenant), and the edge reports it once the answer
 * is sent. One record, so a REST request that runs an RPC in-process is still
 * one request. It never holds a header value other than the request id.
 */
export interface RequestRecord {
  /** The client's `x-request-id` when sane, else a generated one; echoed in the answer. */
  readonly id: string;
  /** The HTTP method. */
  readonly method: string;
  /** The URL path, without the query (which is the client's data). */
  readonly path: string;
  /** `performance.now()` when the request arrived. */
  readonly startedAt: number;
  /** Set by whoever recognizes the request; an RPC adapter leaves it to the content type. */
  protocol: Protocol | undefined;
  /** `package.Service/Method` of the RPC the request ran (REST: the RPC it is bound to). */
  rpc: string | undefined;
  /** The exact path of the plain HTTP endpoint that answered (`/metrics`), for a bounded metrics label. */
  endpoint: string | undefined;
  /** The RPC's outcome as the Connect protocol names it (`ok`, `not_found`, ...), as the interceptors saw it. */
  code: string | undefined;
  /** The tenant the request acted on, once the tenant check resolved it. */
  tenant: string | undefined;
  /** Set once a failure of the service (5xx) has been logged with its cause, so the tracker does not log it twice. */
  failureLogged: boolean;
  /**
   * The operation's work while it runs (operation.ts runOperation). A request
   * whose client left is finished when its connection closes, before its work
   * stops (a search being killed): its access line waits for the work, so its
   * duration is the time the request cost, not the time the client stayed.
   */
  work: Promise<unknown> | undefined;
}

/** The current request's record, for handlers and interceptors; absent when the caller made none (tests, tools). */
export const requestRecordKey = createContextKey<RequestRecord | undefined>(undefined, {
  description: "the request's log and metrics record",
});

/** A client's request id is taken only in this form: it goes into our logs and back into a header. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:/+=-]{1,128}$/;

/** A request's id: the client's `x-request-id` when sane, else a new one. */
export function requestIdOf(sent: string | null | undefined): string {
  return sent !== undefined && sent !== null && SANE_REQUEST_ID.test(sent) ? sent : crypto.randomUUID();
}

/** Paths are logged up to this length; longer ones are cut (they are the client's input). */
const MAX_LOGGED_PATH = 512;

/** Starts the record of a request that arrived just now. */
export function createRequestRecord(init: {
  method: string;
  path: string;
  requestIdHeader: string | null | undefined;
}): RequestRecord {
  return {
    id: requestIdOf(init.requestIdHeader),
    method: init.method,
    path: init.path.length > MAX_LOGGED_PATH ? `${init.path.slice(0, MAX_LOGGED_PATH)}...` : init.path,
    startedAt: performance.now(),
    protocol: undefined,
    rpc: undefined,
    endpoint: undefined,
    code: undefined,
    tenant: undefined,
    failureLogged: false,
    work: undefined,
  };
}

/**
 * Connect's ContextValues, with the same semantics (a value by its key's symbol, the key's default when unset),
 * as a class: Connect's createContextValues makes its three methods anew for every request.
 */
class RequestValues implements ContextValues {
  get<T>(key: ContextKey<T>): T {
    const values = this as unknown as Record<symbol, T>;
    return key.id in values ? (values[key.id] as T) : key.defaultValue;
  }
  set<T>(key: ContextKey<T>, value: T): this {
    (this as unknown as Record<symbol, T>)[key.id] = value;
    return this;
  }
  delete(key: ContextKey<unknown>): this {
    delete (this as unknown as Record<symbol, unknown>)[key.id];
    return this;
  }
}

/** A request's context values, holding its record. */
export function requestValues(record: RequestRecord): ContextValues {
  return new RequestValues().set(requestRecordKey, record);
}

/** The record in `values`, if the caller made one. */
export function recordOf(values: ContextValues | undefined): RequestRecord | undefined {
  return values?.get(requestRecordKey);
}

/** The RPC protocol a request speaks, read from its content type (the RPC adapters match on the same). */
export function rpcProtocolOf(contentType: string | null | undefined): Protocol {
  const type = (contentType ?? "").toLowerCase();
  if (type.startsWith("application/grpc-web")) return "grpc-web";
  if (type.startsWith("application/grpc")) return "grpc";
  return "connect";
}

/** An RPC code by its Connect protocol name (`not_found`); 0, success, is `ok`. */
export function codeName(code: Code | 0): string {
  if (code === 0) return "ok";
  const name = Code[code] ?? "Unknown";
  return name.replace(/[A-Z]/g, (c, at: number) => (at === 0 ? "" : "_") + c.toLowerCase());
}
