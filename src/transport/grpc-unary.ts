/**
 * Binary gRPC unary calls of the registry's RPCs, served by the pipeline
 * (pipeline.ts) with Connect's own protocol helpers. Connect's gRPC handler
 * ran each call through a pipeline of async iterables (split, decompress,
 * parse, invoke, serialize, compress, join, catch), a universal request and
 * response, and their conversion to and from Node's; for one message each
 * way that was the gRPC door's ceiling (BENCHMARKS.md, "Issue 19"). Here a
 * call is: the message the edge read and decoded once (rpc-message.ts), the
 * operation run once, and one answer: headers, one envelope, trailers. What
 * Connect's handler answers, this answers too: the same content type,
 * `grpc-encoding` negotiation (gzip and br in and out, answers under
 * COMPRESS_MIN_BYTES plain), `grpc-timeout` deadlines, and errors as
 * `grpc-status`, `grpc-message` and `grpc-status-details-bin` trailers
 * (setGrpcStatus).
 *
 * Only `application/grpc` and `application/grpc+proto` POSTs of the
 * registry's own methods come here; gRPC's JSON codec, gRPC-Web, health and
 * reflection stay on Connect's router.
 */
import type { DescMessage } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { type Compression, compressionNegotiate, encodeEnvelope, envelopeCompress } from "@connectrpc/connect/protocol";
import { parseTimeout } from "@connectrpc/connect/protocol-grpc";
import type { HttpAnswer } from "../http/http-answer.js";
import type { Result } from "../operations/operation.js";
import { callerConnectError } from "./connect-errors.js";
import { storedDefinitionBinary } from "./definition-meta.js";
import { setGrpcStatus } from "./grpc-status.js";
import { type LeanOptions, messageOf, type PipelineCall, type RpcMessage, runPipeline } from "./pipeline.js";
import { binaryResult, setResultHeaders } from "./rpc-result.js";

// gRPC's headers, lower-case as the edge reads them (Connect's constants are capitalized).
const headerAcceptEncoding = "grpc-accept-encoding";
const headerEncoding = "grpc-encoding";
const headerTimeout = "grpc-timeout";

/** The protocol as the handler's context names it; the content type of every answer, as Connect's handler sends it. */
export const GRPC = { contentType: "application/grpc+proto" } as const;

/** The content types that take the lean path: binary gRPC (a bare `application/grpc` is protobuf). */
const BINARY_GRPC = /^application\/grpc(?:\+proto)?\s*(?:;|$)/i;

/** Whether a POST with this content type is binary gRPC (the lean path's). */
export function isBinaryGrpc(contentType: string | undefined): boolean {
  return contentType !== undefined && BINARY_GRPC.test(contentType);
}

/**
 * The answer's one envelope. A stored definition is written once, behind the envelope's prefix; anything else
 * through its message. Compressed when it is at least `compressMinBytes` (only then a promise).
 */
function envelopeOf(
  output: DescMessage,
  result: Result,
  compression: Compression | null,
  compressMinBytes: number,
): Uint8Array | Promise<Uint8Array> {
  const stored = result.kind === "definition" ? storedDefinitionBinary(result.stored, 5) : undefined;
  if (stored !== undefined && (compression === null || stored.byteLength - 5 < compressMinBytes)) {
    new DataView(stored.buffer, stored.byteOffset, 5).setUint32(1, stored.byteLength - 5);
    return stored;
  }
  const data = stored?.subarray(5) ?? binaryResult(output, result);
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

/** A unary call as the edge hands it on: admitted (or refused), its message still to read. */
export interface GrpcCall extends PipelineCall {
  header(name: string): string | undefined;
  /** Reads and checks the one request message with the request's compression (null: none). */
  message(compression: Compression | null): Promise<RpcMessage>;
}

/** The trailers of a call answered: a copy each (the adapter keeps them until they are sent). */
const GRPC_OK = (): Record<string, string> => ({ "grpc-status": "0" });

/** Serves one binary gRPC call of a unary registry RPC. */
export function serveGrpc(call: GrpcCall, options: LeanOptions): Promise<HttpAnswer> {
  const { compression, timeout } = grpcRequestOptions(call, options);
  const output = call.operation.method.output;
  const headers: Record<string, string> = { "content-type": GRPC.contentType };
  if (compression.response !== null) headers["grpc-encoding"] = compression.response.name;
  const answer = (body: Uint8Array | null, trailers: Record<string, string>): HttpAnswer => ({
    status: 200,
    headers,
    body,
    trailers,
  });
  return runPipeline(call, {
    refusal: compression.error ?? timeout.error,
    timeoutMs: timeout.timeoutMs,
    decode: async () => messageOf(await call.message(compression.request)),
    encode: async (result) => {
      const envelope = envelopeOf(output, result, compression.response, options.compressMinBytes);
      // Awaited only when compressed: an await of bytes would still cost the call a turn of the microtask queue.
      const body = envelope instanceof Uint8Array ? envelope : await envelope;
      setResultHeaders(result, (name, value) => {
        headers[name] = value;
      });
      return answer(body, GRPC_OK());
    },
    fail: (err) => {
      const error = callerConnectError(err, options.logger, call.record.rpc ?? "", call.record);
      return { answer: answer(null, Object.fromEntries(setGrpcStatus(new Headers(), error))), code: error.code };
    },
  });
}
