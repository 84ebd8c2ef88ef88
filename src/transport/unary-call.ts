/**
 * What the lean unary paths share (grpc-unary.ts for gRPC, connect-unary.ts
 * for Connect's unary POSTs): the registry's implementations as one entry per
 * request path, the handler's context, and the call through the same
 * interceptors Connect's router puts in front of them. Connect's own unary
 * and gRPC handlers each made a universal request and response around this,
 * and a linked AbortController per call aborted without a reason when it
 * ended (a DOMException with a stack: 36 µs a call in the profile, BENCHMARKS.md
 * "Issue 19"); here the call's signal is the request's own unless a timeout
 * asks for a deadline.
 */
import {
  create,
  type DescMethod,
  type DescMethodUnary,
  type DescService,
  isMessage,
  type Message,
} from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ContextValues,
  createMethodImplSpec,
  type HandlerContext,
  type Interceptor,
  type MethodImplSpec,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import { type Compression, createDeadlineSignal, createLinkedAbortController } from "@connectrpc/connect/protocol";
import type { RegistryError } from "../domain/errors.js";
import type { StoredDefinition } from "../domain/records.js";
import type { Logger } from "../logger.js";
import { recordOf } from "../observability/request-record.js";
import { callerConnectError } from "./connect-errors.js";
import {
  binaryAnswerKey,
  type HandedOver,
  handedOverKey,
  type RegistryServiceImpl,
  type RpcJsonOptions,
} from "./registry-routes.js";

/** A unary call as the edge hands it on, once the caller is admitted or refused. */
export interface UnaryCall {
  /** A request header by its lower-case name. */
  header(name: string): string | undefined;
  /** Every request header (no pseudo-headers), for the handler's context. */
  headers(): Record<string, string>;
  /** `http://localhost<path>` */
  readonly url: string;
  /** Aborts when the client goes away. */
  readonly signal: AbortSignal | undefined;
  /** The request's context values: the record, the edge's verdict. */
  readonly contextValues: ContextValues;
  /**
   * Reads the message with the request's compression (null: none). The edge leaves its verdict for the
   * handler in contextValues (a refused caller's or message's error is raised inside the RPC).
   */
  message(compression: Compression | null): Promise<UnaryMessage>;
}

/** What a lean path reads of a request: the message, or why there is none. */
export type UnaryMessage =
  | { readonly message: Message; readonly problem?: undefined; readonly failure?: undefined }
  | { readonly message?: undefined; readonly problem: RegistryError; readonly failure?: undefined }
  | { readonly message?: undefined; readonly problem?: undefined; readonly failure: unknown };

/** One registry method as the lean paths call it. */
export interface UnaryMethod {
  readonly method: DescMethod;
  readonly spec: MethodImplSpec;
  /**
   * The router's interceptors in front of the service's own, innermost first: the order the call's chain is
   * built in (the router's order, reversed once here rather than at each call).
   */
  readonly innermostFirst: readonly Interceptor[];
  /** The service's JSON options (the stored-JSON encoder), as Connect's router uses them. */
  readonly jsonOptions: RpcJsonOptions;
}

/** Every unary registry method by request path (`/<service>/<method>`), `interceptors` put before the services'. */
export function createUnaryMethods(
  implementations: readonly RegistryServiceImpl[],
  interceptors: readonly Interceptor[],
): Map<string, UnaryMethod> {
  const methods = new Map<string, UnaryMethod>();
  for (const { service, implementation, options } of implementations) {
    const all = [...interceptors, ...(options.interceptors ?? [])];
    for (const method of service.methods) {
      const impl = implementation[method.localName];
      if (impl === undefined || method.methodKind !== "unary") continue;
      methods.set(`/${service.typeName}/${method.name}`, {
        method,
        spec: createMethodImplSpec(method, impl as never) as MethodImplSpec,
        innermostFirst: [...all].reverse(),
        jsonOptions: options.jsonOptions,
      });
    }
  }
  return methods;
}

/**
 * Why a call's deadline signal is aborted once it is answered (nothing listens by then; Connect's handler does
 * too).
 */
const CALL_OVER = new ConnectError("the call is over", Code.Canceled);

/** Headers as the plain record an answer carries. */
export function plainHeaders(headers: Headers): Record<string, string> {
  if (headers instanceof AnswerHeaders) return headers.record();
  const out: Record<string, string> = {};
  headers.forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

/**
 * The Headers of a call's answer: Headers' methods over a plain object of lower-case names, in the order they were
 * set. undici's Headers checks and sorts its names on every call (~15 µs a call in the lean gRPC path's
 * profile), and a Map behind them was copied into the record the answer carries; this object is the record
 * (handed over once, by `record`). The adapter checks every value as it writes it (Node refuses a header value
 * with a line break).
 */
class AnswerHeaders implements Headers {
  #values: Record<string, string> = {};
  /** Whether `#values` was handed over as the answer's record: a later change is made on a copy. */
  #handed = false;

  constructor(name?: string, value?: string) {
    if (name !== undefined && value !== undefined) this.#put(name, value);
  }
  /** Sets `key` (lower-case) as an own data property, even `__proto__`, which an assignment would not make one. */
  #put(key: string, value: string): void {
    this.#own();
    if (key === "__proto__") Object.defineProperty(this.#values, key, { value, enumerable: true, writable: true });
    else this.#values[key] = value;
  }
  /** Makes `#values` this object's own again if it was handed over. */
  #own(): void {
    if (!this.#handed) return;
    this.#values = { ...this.#values };
    this.#handed = false;
  }
  #get(key: string): string | undefined {
    return Object.hasOwn(this.#values, key) ? this.#values[key] : undefined;
  }
  append(name: string, value: string): void {
    const key = name.toLowerCase();
    const before = this.#get(key);
    this.#put(key, before === undefined ? value : `${before}, ${value}`);
  }
  delete(name: string): void {
    this.#own();
    delete this.#values[name.toLowerCase()];
  }
  get(name: string): string | null {
    return this.#get(name.toLowerCase()) ?? null;
  }
  getSetCookie(): string[] {
    const value = this.#get("set-cookie");
    return value === undefined ? [] : [value];
  }
  has(name: string): boolean {
    return Object.hasOwn(this.#values, name.toLowerCase());
  }
  set(name: string, value: string): void {
    this.#put(name.toLowerCase(), value);
  }
  forEach(callback: (value: string, name: string, parent: Headers) => void, thisArg?: unknown): void {
    for (const [name, value] of Object.entries(this.#values)) callback.call(thisArg, value, name, this);
  }
  entries(): HeadersIterator<[string, string]> {
    return Object.entries(this.#values)[Symbol.iterator]() as HeadersIterator<[string, string]>;
  }
  keys(): HeadersIterator<string> {
    return Object.keys(this.#values)[Symbol.iterator]() as HeadersIterator<string>;
  }
  values(): HeadersIterator<string> {
    return Object.values(this.#values)[Symbol.iterator]() as HeadersIterator<string>;
  }
  [Symbol.iterator](): HeadersIterator<[string, string]> {
    return this.entries();
  }
  /** The headers as the plain record the answer carries: the object behind them, handed over (not copied). */
  record(): Record<string, string> {
    this.#handed = true;
    return this.#values;
  }
}

/** A signal that never aborts, for a call whose adapter gives none. */
const NEVER = new AbortController().signal;

/** A call without a deadline ends with nothing to stop. */
const NOTHING_TO_END = (): void => {};
/** A call without a deadline has no time left to tell. */
const NO_DEADLINE = (): number | undefined => undefined;

/**
 * A call's signal: the request's own (`signal`), or with a timeout one linked signal that also aborts at the
 * deadline, as Connect links them; `done` ends the deadline's timer once the call is over.
 */
export function callSignal(
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
): { signal: AbortSignal | undefined; done(): void } {
  if (timeoutMs === undefined) return { signal, done: NOTHING_TO_END };
  const deadline = createDeadlineSignal(timeoutMs);
  const linked = createLinkedAbortController(deadline.signal, signal);
  return {
    signal: linked.signal,
    // With a reason of its own: an abort without one builds a DOMException with a stack.
    done: () => {
      deadline.cleanup();
      linked.abort(CALL_OVER);
    },
  };
}

/**
 * The handler's context of a lean call, as Connect's createHandlerContext makes it, less what a call of one
 * message does not need: its signal is the request's own unless a timeout (`grpc-timeout`, `connect-timeout-ms`)
 * asks for a deadline (then one linked signal, as Connect links them), and `done` ends the deadline's timer. A
 * class, not an object literal: a literal's getter (the request's headers, made when first read) and closures
 * were made anew at every call.
 */
export class LeanContext implements HandlerContext {
  readonly service: DescService;
  readonly timeoutMs: () => number | undefined;
  readonly requestMethod = "POST";
  readonly responseHeader: AnswerHeaders;
  readonly responseTrailer = new AnswerHeaders();
  readonly protocolName: string;
  readonly values: ContextValues;
  readonly url: string;
  /** Ends the deadline's timer, if the call has one; called once the call is answered. */
  readonly done: () => void;
  /** What the handler hands over as bytes (registry-routes.ts's HandedOver). */
  readonly handedOver: HandedOver = {};
  /** The deadline's linked signal, when the call has a deadline; else the request's own is read when asked. */
  readonly #deadlineSignal: AbortSignal | undefined;
  #requestHeader: Headers | undefined;

  constructor(
    readonly method: DescMethod,
    private readonly call: UnaryCall,
    timeoutMs: number | undefined,
    protocol: { readonly name: string; readonly contentType: string; readonly binary: boolean },
  ) {
    this.service = method.parent;
    this.done = NOTHING_TO_END;
    this.timeoutMs = NO_DEADLINE;
    if (timeoutMs !== undefined) {
      const { signal, done } = callSignal(call.signal, timeoutMs);
      this.#deadlineSignal = signal;
      this.done = done;
      const end = Date.now() + timeoutMs;
      this.timeoutMs = () => end - Date.now();
    }
    this.responseHeader = new AnswerHeaders("content-type", protocol.contentType);
    this.protocolName = protocol.name;
    this.values = call.contextValues.set(binaryAnswerKey, protocol.binary).set(handedOverKey, this.handedOver);
    this.url = call.url;
  }

  /**
   * The call's signal: the deadline's, else the request's own, read only when someone reads it (a GET or a POST
   * reads none, and the adapter may make it only then).
   */
  get signal(): AbortSignal {
    return this.#deadlineSignal ?? this.call.signal ?? NEVER;
  }

  /** Made when first read: the registry's handlers read none here (binaryAnswerKey tells them the codec). */
  get requestHeader(): Headers {
    this.#requestHeader ??= new Headers(this.call.headers());
    return this.#requestHeader;
  }

  /** This context with the values and signal of a request an interceptor replaced (as Connect merges them). */
  withRequest(req: UnaryRequest): HandlerContext {
    if (req instanceof LeanRequest && req.context === this) return this;
    // A copy of a LeanRequest ({ ...req }) has no signal: its getter is not copied.
    const signal = (req.signal as AbortSignal | undefined) ?? this.signal;
    if (req.contextValues === this.values && signal === this.signal) return this;
    const context = this;
    return {
      method: this.method,
      service: this.service,
      signal,
      timeoutMs: this.timeoutMs,
      requestMethod: this.requestMethod,
      get requestHeader() {
        return context.requestHeader;
      },
      responseHeader: this.responseHeader,
      responseTrailer: this.responseTrailer,
      protocolName: this.protocolName,
      values: req.contextValues,
      url: this.url,
    };
  }
}

/** The handler's context of a lean call (LeanContext). */
export function handlerContext(
  method: DescMethod,
  call: UnaryCall,
  timeoutMs: number | undefined,
  protocol: { readonly name: string; readonly contentType: string; readonly binary: boolean },
): LeanContext {
  return new LeanContext(method, call, timeoutMs, protocol);
}

/**
 * A lean call's request as its interceptors see it, the request's headers read only if someone reads them (the
 * request and the context share the one lazily made Headers; Connect's copies it into each). `header` and
 * `signal` are getters of the class: a copy (`{ ...req }`) has neither. The registry's interceptors (the record,
 * the error mapping) pass the request on as it is; the handler's context of a copy keeps its own signal and
 * headers (LeanContext.withRequest).
 */
class LeanRequest implements UnaryRequest {
  readonly stream = false;
  readonly requestMethod = "POST";
  readonly service: DescService;
  readonly url: string;
  readonly contextValues: ContextValues;

  constructor(
    readonly method: DescMethodUnary,
    readonly message: Message,
    readonly context: LeanContext,
  ) {
    this.service = method.parent;
    this.url = context.url;
    this.contextValues = context.values;
  }
  get header(): Headers {
    return this.context.requestHeader;
  }
  get signal(): AbortSignal {
    return this.context.signal;
  }
}

/** The implementation called through the interceptors, as Connect's invokeUnaryImplementation calls it. */
async function invoke(
  spec: MethodImplSpec,
  context: LeanContext,
  input: Message | undefined,
  innermostFirst: readonly Interceptor[],
): Promise<Message> {
  const method = spec.method as DescMethodUnary;
  const impl = spec.impl as (req: Message, ctx: HandlerContext) => Promise<Message>;
  let next: UnaryFn = async (req) => {
    const output = await impl(req.message, context.withRequest(req));
    return {
      stream: false,
      message: isMessage(output, method.output) ? output : create(method.output, output),
      method,
      service: method.parent,
      header: context.responseHeader,
      trailer: context.responseTrailer,
    };
  };
  for (const interceptor of innermostFirst) next = interceptor(next as never) as UnaryFn;
  // No message (a refused one): an empty one; the verdict the edge left raises the refusal.
  const response = await next(new LeanRequest(method, input ?? create(method.input), context));
  // An interceptor that answered headers of its own: they go out with the call's.
  if (response.header !== context.responseHeader)
    response.header.forEach((value, name) => void context.responseHeader.set(name, value));
  if (response.trailer !== context.responseTrailer)
    response.trailer.forEach((value, name) => void context.responseTrailer.set(name, value));
  return response.message;
}

type UnaryFn = (req: UnaryRequest) => Promise<UnaryResponse>;

/**
 * What the handler handed over as bytes (registry-routes.ts's HandedOver), if the answer `output` is its
 * placeholder: the stored definition of a binary answer, or a JSON answer's bytes.
 */
export function handedOverAnswer(
  output: Message,
  slot: HandedOver,
): { stored?: StoredDefinition; json?: Uint8Array<ArrayBuffer> } | undefined {
  return slot.placeholder !== undefined && output === slot.placeholder ? slot : undefined;
}

/**
 * The call's answer message: the protocol's own refusals first, as Connect's handlers raise them (an unknown
 * encoding, then a malformed timeout, before the message), then the message read with the request's
 * compression and the implementation invoked. A refused message (a problem) was left in the verdict by the
 * edge: the handler raises it.
 */
export async function outputOf(
  unary: UnaryMethod,
  context: LeanContext,
  call: UnaryCall,
  compression: { readonly request: Compression | null; readonly error?: ConnectError | undefined },
  timeout: { readonly error?: ConnectError | undefined },
): Promise<Message> {
  if (compression.error !== undefined) throw compression.error;
  if (timeout.error !== undefined) throw timeout.error;
  const read = await call.message(compression.request);
  if (read.failure !== undefined) throw readFailure(read.failure);
  return invoke(unary.spec, context, read.message, unary.innermostFirst);
}

/**
 * What a body that could not be read whole answers: a broken envelope is Connect's own error; anything else is
 * the client's connection failing under it, no fault of the service (CANCELED).
 */
export function readFailure(failure: unknown): ConnectError {
  return failure instanceof ConnectError ? failure : ConnectError.from(failure, Code.Canceled);
}

/**
 * What a failed call answers: a ConnectError as it is (the handlers' own errors were mapped by the error
 * interceptor, Connect's protocol errors are the caller's); anything else, raised outside the interceptors
 * (writing the answer), as the interceptor answers it (callerConnectError): INTERNAL, the original logged once
 * and never shown. Connect's own handlers answered such a failure "internal error" and logged nothing.
 */
export function failureOf(err: unknown, unary: UnaryMethod, call: UnaryCall, logger: Logger): ConnectError {
  if (err instanceof ConnectError) return err;
  const procedure = `${unary.method.parent.typeName}/${unary.method.name}`;
  return callerConnectError(err, logger, procedure, recordOf(call.contextValues));
}
