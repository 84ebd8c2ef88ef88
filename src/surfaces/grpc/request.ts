/**
 * What a binary gRPC request says of itself: its content type, the
 * compression of the request and of the answer (`grpc-encoding`,
 * `grpc-accept-encoding`) and its deadline (`grpc-timeout`), read as
 * Connect's gRPC handler reads them, each with the error a bad value raises.
 * The message itself is read by the pipeline's message check.
 */
import type { ConnectError } from "@connectrpc/connect";
import { type Compression, compressionNegotiate } from "@connectrpc/connect/protocol";
import { parseTimeout } from "@connectrpc/connect/protocol-grpc";
import type { RpcOptions } from "../pipeline/pipeline.js";

// gRPC's headers, lower-case as the edge reads them (Connect's constants are capitalized).
const headerAcceptEncoding = "grpc-accept-encoding";
const headerEncoding = "grpc-encoding";
const headerTimeout = "grpc-timeout";

/** The content type of every answer, as Connect's handler sends it. */
export const GRPC = { contentType: "application/grpc+proto" } as const;

/** The content types the edge serves itself: binary gRPC (a bare `application/grpc` is protobuf). */
const BINARY_GRPC = /^application\/grpc(?:\+proto)?\s*(?:;|$)/i;

/** Whether a POST with this content type is binary gRPC (the gRPC door's). */
export function isBinaryGrpc(contentType: string | undefined): boolean {
  return contentType !== undefined && BINARY_GRPC.test(contentType);
}

/** What compressionNegotiate answers for a header pair it accepts: the same few pairs come again and again. */
type Negotiated = ReturnType<typeof compressionNegotiate>;

/** What a call's headers ask (grpcRequestOptions). */
type RequestOptions = { compression: Negotiated; timeout: { timeoutMs?: number; error?: ConnectError } };

/** The header reader of each RpcOptions (its compressions), made at its first call. */
const readers = new WeakMap<RpcOptions, (request: { header(name: string): string | undefined }) => RequestOptions>();

/**
 * What a gRPC call's headers ask of the protocol, as Connect's gRPC handler reads them: the compression of the
 * request and of the answer (`grpc-encoding`, `grpc-accept-encoding`) and the deadline (`grpc-timeout`), each
 * with the error a bad value raises (before the message is read).
 */
export function grpcRequestOptions(
  request: { header(name: string): string | undefined },
  options: RpcOptions,
): RequestOptions {
  let reader = readers.get(options);
  if (reader === undefined) readers.set(options, (reader = headerReader(options)));
  return reader(request);
}

/** grpcRequestOptions for the compressions of `options`, keeping the negotiations it made. */
function headerReader(options: RpcOptions): (request: { header(name: string): string | undefined }) => RequestOptions {
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
