/**
 * The lean Connect path: Connect unary POSTs (JSON and protobuf) of the
 * registry's RPCs, served as Connect's unary handler serves them but without
 * its universal request and response (unary-call.ts says what that saves).
 * The same content types, `content-encoding` / `accept-encoding` negotiation
 * (answers under COMPRESS_MIN_BYTES plain), `connect-timeout-ms` deadlines,
 * response trailers as `trailer-` headers, and errors as Connect's JSON error
 * body with the HTTP status of their code and their metadata as headers
 * (errorToJsonBytes, codeToHttpStatus). JSON answers are written by the
 * services' own JSON options: a stored definition's JSON is written as it is
 * stored (stored-json.ts).
 *
 * Connect GETs, streaming content types and everything not a registry RPC
 * stay on Connect's router.
 */
import { type Message, toBinary, toJsonString } from "@bufbuild/protobuf";
import { compressionNegotiate } from "@connectrpc/connect/protocol";
import {
  codeToHttpStatus,
  errorToJsonBytes,
  parseContentType,
  parseTimeout,
} from "@connectrpc/connect/protocol-connect";
import type { StoredDefinition } from "../domain/records.js";
import type { HttpAnswer } from "../http/http-answer.js";
import { storedDefinitionBinary } from "./definition-meta.js";
import type { LeanOptions } from "./grpc-unary.js";
import {
  failureOf,
  handedOverAnswer,
  handlerContext,
  outputOf,
  plainHeaders,
  type UnaryCall,
  type UnaryMethod,
} from "./unary-call.js";

// Connect's unary headers, lower-case as the edge reads them.
const headerAcceptEncoding = "accept-encoding";
const headerEncoding = "content-encoding";
const headerTimeout = "connect-timeout-ms";

const CONNECT_JSON = { name: "connect", contentType: "application/json", binary: false } as const;
const CONNECT_PROTO = { name: "connect", contentType: "application/proto", binary: true } as const;

/** The codec of a Connect unary POST by its content type (`binary`: protobuf); undefined for anything else. */
export function connectUnaryFormat(contentType: string | undefined): { binary: boolean } | undefined {
  const type = contentType === undefined ? undefined : parseContentType(contentType);
  return type === undefined || type.stream ? undefined : { binary: type.binary };
}

/** The bytes of an answer its handler handed over in the call's codec (a failure here is the service's). */
function handedOverBytes(handed: { stored?: StoredDefinition; json?: Uint8Array }, binary: boolean): Uint8Array {
  if (binary && handed.stored !== undefined) return storedDefinitionBinary(handed.stored);
  if (!binary && handed.json !== undefined) return handed.json;
  throw new Error(`The handler handed over no ${binary ? "binary" : "JSON"} answer.`);
}

/** Serves one Connect unary POST of `unary`. */
export async function serveConnect(
  unary: UnaryMethod,
  call: UnaryCall,
  binary: boolean,
  options: LeanOptions,
): Promise<HttpAnswer> {
  const { method, jsonOptions } = unary;
  const timeout = parseTimeout(call.header(headerTimeout) ?? null, Number.MAX_SAFE_INTEGER);
  const context = handlerContext(method, call, timeout.timeoutMs, binary ? CONNECT_PROTO : CONNECT_JSON);
  const compression = compressionNegotiate(
    [...options.acceptCompression],
    call.header(headerEncoding) ?? null,
    call.header(headerAcceptEncoding) ?? null,
    headerAcceptEncoding,
  );
  let status = 200;
  let body: Uint8Array;
  try {
    const output = await outputOf(unary, context, call, compression, timeout);
    const handed = handedOverAnswer(output, context.handedOver);
    if (handed !== undefined) body = handedOverBytes(handed, binary);
    else body = binary ? toBinary(method.output, output) : json(output);
  } catch (err) {
    const error = failureOf(err, unary, call, options.logger);
    status = codeToHttpStatus(error.code);
    context.responseHeader.set("content-type", CONNECT_JSON.contentType);
    error.metadata.forEach((value, name) => void context.responseHeader.set(name, value));
    body = errorToJsonBytes(error, jsonOptions);
  } finally {
    context.done();
  }
  if (compression.response !== null && body.byteLength >= options.compressMinBytes) {
    body = await compression.response.compress(body);
    context.responseHeader.set(headerEncoding, compression.response.name);
  }
  const headers = plainHeaders(context.responseHeader);
  context.responseTrailer.forEach((value, name) => {
    headers[`trailer-${name}`] = value;
  });
  return { status, headers, body };

  /**
   * The answer as JSON, by the service's own options (a stored definition's stand-in writes its stored JSON).
   * A failure here is the service's: failureOf logs it.
   */
  function json(output: Message): Uint8Array {
    const encoder = jsonOptions.textEncoder ?? new TextEncoder();
    return encoder.encode(toJsonString(method.output, output, jsonOptions));
  }
}
