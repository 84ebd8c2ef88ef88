/**
 * What a Connect unary POST says of itself: its codec by content type, the
 * compression of the request and of the answer (`content-encoding`,
 * `accept-encoding`) and its deadline (`connect-timeout-ms`), read as
 * Connect's unary handler reads them, each with the error a bad value raises.
 * The message itself is read by the pipeline's message check.
 */
import { compressionNegotiate } from "@connectrpc/connect/protocol";
import { parseContentType, parseTimeout } from "@connectrpc/connect/protocol-connect";
import type { RpcOptions } from "../pipeline/pipeline.js";

// Connect's unary headers, lower-case as the edge reads them.
const headerAcceptEncoding = "accept-encoding";
export const headerEncoding = "content-encoding";
const headerTimeout = "connect-timeout-ms";

/** The codec of a Connect unary POST by its content type (`binary`: protobuf); undefined for anything else. */
export function connectUnaryFormat(contentType: string | undefined): { binary: boolean } | undefined {
  const type = contentType === undefined ? undefined : parseContentType(contentType);
  return type === undefined || type.stream ? undefined : { binary: type.binary };
}

/** What a Connect unary POST's headers ask of the protocol: its compressions and its deadline. */
export function connectRequestOptions(request: { header(name: string): string | undefined }, options: RpcOptions) {
  return {
    timeout: parseTimeout(request.header(headerTimeout) ?? null, Number.MAX_SAFE_INTEGER),
    compression: compressionNegotiate(
      [...options.acceptCompression],
      request.header(headerEncoding) ?? null,
      request.header(headerAcceptEncoding) ?? null,
      headerAcceptEncoding,
    ),
  };
}
