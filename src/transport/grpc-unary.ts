/**
 * The lean gRPC path: binary gRPC unary calls of the registry's RPCs, served
 * without Connect's universal handler but with the same handlers and
 * Connect's own protocol helpers (unary-call.ts). Connect's gRPC handler runs
 * each call through a pipeline of async iterables (split, decompress, parse,
 * invoke, serialize, compress, join, catch), a universal request and
 * response, and their conversion to and from Node's; for one message each way
 * that was the gRPC door's ceiling (BENCHMARKS.md, "Issue 19"). Here a call
 * is: the message the edge read and decoded once (rpc-message.ts), the
 * implementation invoked through the same interceptors, and one answer:
 * headers, one envelope, trailers. What Connect's handler answers, this
 * answers too: the same content type, `grpc-encoding` negotiation (gzip and br
 * in and out, answers under COMPRESS_MIN_BYTES plain), `grpc-timeout`
 * deadlines, and errors as `grpc-status`, `grpc-message` and
 * `grpc-status-details-bin` trailers with the error's metadata
 * (setGrpcStatus).
 *
 * Only `application/grpc` and `application/grpc+proto` POSTs of the
 * registry's own methods come here; gRPC's JSON codec, gRPC-Web, health and
 * reflection stay on Connect's router.
 */
import { type DescMethod, type Message, toBinary } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { type Compression, compressionNegotiate, encodeEnvelope, envelopeCompress } from "@connectrpc/connect/protocol";
import { parseTimeout } from "@connectrpc/connect/protocol-grpc";
import type { StoredDefinition } from "../domain/records.js";
import type { HttpAnswer } from "../http/http-answer.js";
import type { Logger } from "../logger.js";
import { storedDefinitionBinary } from "./definition-meta.js";
import { setGrpcStatus } from "./grpc-status.js";
import {
  failureOf,
  handedOverAnswer,
  handlerContext,
  outputOf,
  plainHeaders,
  type UnaryCall,
  type UnaryMethod,
} from "./unary-call.js";

// gRPC's headers, lower-case as the edge reads them (Connect's constants are capitalized).
const headerAcceptEncoding = "grpc-accept-encoding";
const headerEncoding = "grpc-encoding";
const headerTimeout = "grpc-timeout";

/** The protocol as the handler's context names it; the content type of every answer, as Connect's handler sends it. */
export const GRPC = { name: "grpc", contentType: "application/grpc+proto", binary: true } as const;

/** The content types that take the lean path: binary gRPC (a bare `application/grpc` is protobuf). */
const BINARY_GRPC = /^application\/grpc(?:\+proto)?\s*(?:;|$)/i;

/** Whether a POST with this content type is binary gRPC (the lean path's). */
export function isBinaryGrpc(contentType: string | undefined): boolean {
  return contentType !== undefined && BINARY_GRPC.test(contentType);
}

export interface LeanOptions {
  /** Where a failure the interceptors did not see is logged. */
  readonly logger: Logger;
  /** The compressions accepted and answered with (the router's). */
  readonly acceptCompression: readonly Compression[];
  /** Answers smaller than this go uncompressed (the router's compressMinBytes). */
  readonly compressMinBytes: number;
}

/**
 * The answer's one envelope. A stored definition the handler handed over is written once, behind the envelope's
 * prefix; anything else through toBinary. Compressed when it is at least `compressMinBytes` (only then a promise).
 */
function envelopeOf(
  output: Message,
  handedOver: StoredDefinition | undefined,
  method: DescMethod,
  compression: Compression | null,
  compressMinBytes: number,
): Uint8Array | Promise<Uint8Array> {
  const stored = handedOver === undefined ? undefined : storedDefinitionBinary(handedOver, 5);
  if (stored !== undefined && (compression === null || stored.byteLength - 5 < compressMinBytes)) {
    new DataView(stored.buffer, stored.byteOffset, 5).setUint32(1, stored.byteLength - 5);
    return stored;
  }
  const data = stored?.subarray(5) ?? toBinary(method.output, output);
  if (compression === null || data.byteLength < compressMinBytes) return encodeEnvelope(0, data);
  return envelopeCompress({ flags: 0, data }, compression, compressMinBytes).then((envelope) =>
    encodeEnvelope(envelope.flags, envelope.data),
  );
}

/** What compressionNegotiate answers for a header pair it accepts: the same few pairs come again and again. */
type Negotiated = ReturnType<typeof compressionNegotiate>;

/** What a call's headers ask (grpcRequestOptions). */
type RequestOptions = { compression: Negotiated; timeout: { timeoutMs?: number; error?: ConnectError } };

/** The header reader of each LeanOptions (its compressions), made at its first call. */
const readers = new WeakMap<LeanOptions, (request: { header(name: string): string | undefined }) => RequestOptions>();

/**
 * What a gRPC call's headers ask of the protocol, as Connect's gRPC handler reads them: the compression of the
 * request and of the answer (`grpc-encoding`, `grpc-accept-encoding`) and the deadline (`grpc-timeout`), each
 * with the error a bad value raises (before the message is read).
 */
export function grpcRequestOptions(
  request: { header(name: string): string | undefined },
  options: LeanOptions,
): RequestOptions {
  let reader = readers.get(options);
  if (reader === undefined) readers.set(options, (reader = headerReader(options)));
  return reader(request);
}

/** grpcRequestOptions for the compressions of `options`, keeping the negotiations it made. */
function headerReader(options: LeanOptions): (request: { header(name: string): string | undefined }) => RequestOptions {
  /** Negotiations without an error by `grpc-encoding` and `grpc-accept-encoding` (at most NEGOTIATIONS_KEPT). */
  const negotiated = new Map<string | undefined, Map<string | undefined, Negotiated>>();
  let kept = 0;
  const negotiate = (encoding: string | undefined, accepted: string | undefined): Negotiated => {
    const known = negotiated.get(encoding)?.get(accepted);
    if (known !== undefined) return known;
    const result = compressionNegotiate(
      options.acceptCompression as Compression[],
      encoding ?? null,
      accepted ?? null,
      headerAcceptEncoding,
    );
    if (result.error === undefined && kept < NEGOTIATIONS_KEPT) {
      let byAccepted = negotiated.get(encoding);
      if (byAccepted === undefined) negotiated.set(encoding, (byAccepted = new Map()));
      byAccepted.set(accepted, result);
      kept++;
    }
    return result;
  };
  return (request) => {
    const timeout = request.header(headerTimeout);
    return {
      compression: negotiate(request.header(headerEncoding), request.header(headerAcceptEncoding)),
      timeout: timeout === undefined ? NO_TIMEOUT : parseTimeout(timeout, Number.MAX_SAFE_INTEGER),
    };
  };
}

/** How many header pairs grpcRequestOptions keeps the negotiation of (a client's own spellings are few). */
const NEGOTIATIONS_KEPT = 64;
/** A call that asks for no deadline. */
const NO_TIMEOUT: RequestOptions["timeout"] = Object.freeze({});

/** Serves one binary gRPC call of `unary`. */
export async function serveGrpc(unary: UnaryMethod, call: UnaryCall, options: LeanOptions): Promise<HttpAnswer> {
  const { method } = unary;
  const { compression, timeout } = grpcRequestOptions(call, options);
  const context = handlerContext(method, call, timeout.timeoutMs, GRPC);
  if (compression.response !== null) context.responseHeader.set(headerEncoding, compression.response.name);
  let body: Uint8Array | null = null;
  try {
    const output = await outputOf(unary, context, call, compression, timeout);
    const stored = handedOverAnswer(output, context.handedOver)?.stored;
    const envelope = envelopeOf(output, stored, method, compression.response, options.compressMinBytes);
    // Awaited only when compressed: an await of bytes would still cost the call a turn of the microtask queue.
    body = envelope instanceof Uint8Array ? envelope : await envelope;
    setGrpcStatus(context.responseTrailer, undefined);
  } catch (err) {
    body = null;
    setGrpcStatus(context.responseTrailer, failureOf(err, unary, call, options.logger));
  } finally {
    context.done();
  }
  return {
    status: 200,
    headers: plainHeaders(context.responseHeader),
    body,
    trailers: plainHeaders(context.responseTrailer),
  };
}
