/**
 * The lean gRPC path: binary gRPC unary calls of the registry's RPCs, served
 * without Connect's universal handler but with the same handlers and
 * Connect's own protocol helpers. Connect's gRPC handler runs each call
 * through a pipeline of async iterables (split, decompress, parse, invoke,
 * serialize, compress, join, catch), a universal request and response, and
 * their conversion to and from Node's; for one message each way that was the
 * gRPC door's ceiling (BENCHMARKS.md, "Issue 19"). Here a call is: the
 * message the edge read and decoded once (rpc-message.ts), the registry's
 * implementation invoked through the same interceptors
 * (`invokeUnaryImplementation`), and one answer: headers, one envelope,
 * trailers. What Connect's handler answers, this answers too: the same
 * content type, `grpc-encoding` negotiation (gzip and br in and out, answers
 * under COMPRESS_MIN_BYTES plain), `grpc-timeout` deadlines, and errors as
 * `grpc-status`, `grpc-message` and `grpc-status-details-bin` trailers with the
 * error's metadata (setTrailerStatus).
 *
 * Only `application/grpc` and `application/grpc+proto` POSTs of the
 * registry's own methods come here; gRPC's JSON codec, gRPC-Web, Connect,
 * health and reflection stay on Connect's router.
 */
import { create, type DescMethod, type DescMethodUnary, isMessage, type Message, toBinary } from "@bufbuild/protobuf";
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
import {
  type Compression,
  compressionNegotiate,
  createDeadlineSignal,
  createLinkedAbortController,
  encodeEnvelope,
  envelopeCompress,
} from "@connectrpc/connect/protocol";
import { parseTimeout, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import type { HttpAnswer } from "../http/http-answer.js";
import { storedAnswerBinary } from "./definition-meta.js";
import { binaryAnswerKey, type RegistryServiceImpl } from "./registry-routes.js";
import type { GrpcMessage } from "./rpc-message.js";

// gRPC's headers, lower-case as the edge reads them (Connect's constants are capitalized).
const headerAcceptEncoding = "grpc-accept-encoding";
const headerEncoding = "grpc-encoding";
const headerTimeout = "grpc-timeout";

/** The content type of every answer, as Connect's gRPC handler sends it. */
const CONTENT_TYPE = "application/grpc+proto";

/** The content types that take the lean path: binary gRPC (a bare `application/grpc` is protobuf). */
const BINARY_GRPC = /^application\/grpc(?:\+proto)?\s*(?:;|$)/i;

/** Why a call's deadline signal is aborted once it is answered (nothing listens by then; Connect's handler does too). */
const CALL_OVER = new ConnectError("the call is over", Code.Canceled);

/** Whether a POST with this content type is binary gRPC (the lean path's). */
export function isBinaryGrpc(contentType: string | undefined): boolean {
  return contentType !== undefined && BINARY_GRPC.test(contentType);
}

/** A gRPC call as the edge hands it on, once the caller is admitted or refused. */
export interface GrpcCall {
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
  message(compression: Compression | null): Promise<GrpcMessage>;
}

export interface GrpcUnaryOptions {
  /** The compressions accepted and answered with (the router's). */
  readonly acceptCompression: readonly Compression[];
  /** Answers smaller than this go uncompressed (the router's compressMinBytes). */
  readonly compressMinBytes: number;
  /** Put before each service's own interceptors, as withInterceptors puts them on the router. */
  readonly interceptors: readonly Interceptor[];
}

/** Serves one binary gRPC call of one method. */
export type GrpcUnaryHandler = (call: GrpcCall) => Promise<HttpAnswer>;

/** The lean gRPC handler of every registry method, by request path (`/<service>/<method>`). */
export function createGrpcUnaryHandlers(
  implementations: readonly RegistryServiceImpl[],
  options: GrpcUnaryOptions,
): Map<string, { readonly method: DescMethod; readonly handle: GrpcUnaryHandler }> {
  const handlers = new Map<string, { method: DescMethod; handle: GrpcUnaryHandler }>();
  for (const { service, implementation, options: serviceOptions } of implementations) {
    const interceptors = [...options.interceptors, ...(serviceOptions.interceptors ?? [])];
    for (const method of service.methods) {
      const impl = implementation[method.localName];
      if (impl === undefined || method.methodKind !== "unary") continue;
      const spec = createMethodImplSpec(method, impl as never) as MethodImplSpec;
      handlers.set(`/${service.typeName}/${method.name}`, {
        method,
        handle: (call) => serveCall(spec, interceptors, options, call),
      });
    }
  }
  return handlers;
}

/** Headers as the plain record an answer carries. */
function recordOf(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

/**
 * The answer's one envelope. A stored definition's bytes are written once, behind the envelope's prefix
 * (storedAnswerBinary); anything else through toBinary. Compressed when it is at least `compressMinBytes`.
 */
async function envelopeOf(
  output: Message,
  method: DescMethod,
  compression: Compression | null,
  compressMinBytes: number,
): Promise<Uint8Array> {
  const stored = storedAnswerBinary(output, 5);
  if (stored !== undefined && (compression === null || stored.byteLength - 5 < compressMinBytes)) {
    new DataView(stored.buffer, stored.byteOffset, 5).setUint32(1, stored.byteLength - 5);
    return stored;
  }
  const data = stored?.subarray(5) ?? toBinary(method.output, output);
  const envelope = await envelopeCompress({ flags: 0, data }, compression, compressMinBytes);
  return encodeEnvelope(envelope.flags, envelope.data);
}

/**
 * The implementation called through the interceptors, as Connect's invokeUnaryImplementation calls it, but
 * with the request's headers read only if someone reads them (the request and the context share the one
 * lazily made Headers; Connect's copies it into each).
 */
async function invoke(
  spec: MethodImplSpec,
  context: HandlerContext,
  input: Message,
  interceptors: readonly Interceptor[],
): Promise<Message> {
  const method = spec.method as DescMethodUnary;
  const impl = spec.impl as (req: Message, ctx: HandlerContext) => Promise<Message>;
  let next: UnaryFn = async (req) => {
    // As Connect merges them: an interceptor may have replaced the request's values or signal.
    const ctx =
      req.contextValues === context.values && req.signal === context.signal
        ? context
        : { ...context, values: req.contextValues, signal: req.signal };
    const output = await impl(req.message, ctx);
    return {
      stream: false,
      message: isMessage(output, method.output) ? output : create(method.output, output),
      method,
      service: method.parent,
      header: context.responseHeader,
      trailer: context.responseTrailer,
    };
  };
  for (const interceptor of [...interceptors].reverse()) next = interceptor(next as never) as UnaryFn;
  const request: UnaryRequest = {
    stream: false,
    message: input,
    method,
    service: method.parent,
    requestMethod: "POST",
    url: context.url,
    signal: context.signal,
    get header() {
      return context.requestHeader;
    },
    contextValues: context.values,
  };
  const response = await next(request);
  // An interceptor that answered headers of its own: they go out with the call's.
  if (response.header !== context.responseHeader)
    response.header.forEach((value, name) => void context.responseHeader.set(name, value));
  if (response.trailer !== context.responseTrailer)
    response.trailer.forEach((value, name) => void context.responseTrailer.set(name, value));
  return response.message;
}

type UnaryFn = (req: UnaryRequest) => Promise<UnaryResponse>;

/** A signal that never aborts, for a call whose adapter gives none. */
const NEVER = new AbortController().signal;

/**
 * The handler's context, as Connect's createHandlerContext makes it, less what a call of one message does not
 * need: its signal is the request's own unless a `grpc-timeout` asks for a deadline (then one linked signal, as
 * Connect links them), and `done` ends the deadline's timer.
 */
function handlerContext(
  method: DescMethod,
  call: GrpcCall,
  timeoutMs: number | undefined,
): HandlerContext & { done(): void } {
  let signal = call.signal ?? NEVER;
  let done = (): void => {};
  let remaining = (): number | undefined => undefined;
  if (timeoutMs !== undefined) {
    const deadline = createDeadlineSignal(timeoutMs);
    const linked = createLinkedAbortController(deadline.signal, call.signal);
    signal = linked.signal;
    const end = Date.now() + timeoutMs;
    remaining = () => end - Date.now();
    // With a reason of its own: an abort without one builds a DOMException with a stack.
    done = () => {
      deadline.cleanup();
      linked.abort(CALL_OVER);
    };
  }
  let requestHeader: Headers | undefined;
  return {
    method,
    service: method.parent,
    signal,
    timeoutMs: remaining,
    requestMethod: "POST",
    // Made when first read: the registry's handlers read none on this path (binaryAnswerKey tells them the codec).
    get requestHeader() {
      requestHeader ??= new Headers(call.headers());
      return requestHeader;
    },
    responseHeader: new Headers({ "content-type": CONTENT_TYPE }),
    responseTrailer: new Headers(),
    protocolName: "grpc",
    values: call.contextValues.set(binaryAnswerKey, true),
    url: call.url,
    done,
  };
}

async function serveCall(
  spec: MethodImplSpec,
  interceptors: Interceptor[],
  options: GrpcUnaryOptions,
  call: GrpcCall,
): Promise<HttpAnswer> {
  const method = spec.method;
  const timeout = parseTimeout(call.header(headerTimeout) ?? null, Number.MAX_SAFE_INTEGER);
  const context = handlerContext(method, call, timeout.timeoutMs);
  const compression = compressionNegotiate(
    [...options.acceptCompression],
    call.header(headerEncoding) ?? null,
    call.header(headerAcceptEncoding) ?? null,
    headerAcceptEncoding,
  );
  if (compression.response !== null) context.responseHeader.set(headerEncoding, compression.response.name);
  let body: Uint8Array | null = null;
  try {
    // As Connect's handler raises them: an unknown encoding, then a malformed timeout, before the message.
    if (compression.error !== undefined) throw compression.error;
    if (timeout.error !== undefined) throw timeout.error;
    const read = await call.message(compression.request);
    if (read.failure !== undefined) throw read.failure;
    // A refused message (read.problem) was left in the verdict by the edge: the handler raises it.
    const input = read.message ?? create(method.input);
    const output = await invoke(spec, context, input, interceptors);
    body = await envelopeOf(output as Message, method, compression.response, options.compressMinBytes);
    setTrailerStatus(context.responseTrailer, undefined);
  } catch (err) {
    body = null;
    setTrailerStatus(
      context.responseTrailer,
      err instanceof ConnectError ? err : new ConnectError("internal error", Code.Internal, undefined, undefined, err),
    );
  } finally {
    context.done();
  }
  return {
    status: 200,
    headers: recordOf(context.responseHeader),
    body,
    trailers: recordOf(context.responseTrailer),
  };
}
