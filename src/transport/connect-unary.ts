/**
 * Connect unary POSTs (JSON and protobuf) of the registry's RPCs, served by
 * the pipeline (pipeline.ts) as Connect's unary handler answers them: the
 * same content types, `content-encoding` / `accept-encoding` negotiation
 * (answers under COMPRESS_MIN_BYTES plain), `connect-timeout-ms` deadlines,
 * and errors as Connect's JSON error body with the HTTP status of their code
 * and their metadata as headers (errorToJsonBytes, codeToHttpStatus). A
 * definition's JSON is written as it is stored (rpc-result.ts).
 *
 * Connect GETs, streaming content types and everything not a registry RPC
 * stay on Connect's router.
 */
import { type Compression, compressionNegotiate } from "@connectrpc/connect/protocol";
import {
  codeToHttpStatus,
  errorToJsonBytes,
  parseContentType,
  parseTimeout,
} from "@connectrpc/connect/protocol-connect";
import type { HttpAnswer } from "../http/http-answer.js";
import { callerConnectError } from "./connect-errors.js";
import { type LeanOptions, messageOf, type PipelineCall, type RpcMessage, runPipeline } from "./pipeline.js";
import { binaryResult, jsonResult, setResultHeaders } from "./rpc-result.js";

// Connect's unary headers, lower-case as the edge reads them.
const headerAcceptEncoding = "accept-encoding";
const headerEncoding = "content-encoding";
const headerTimeout = "connect-timeout-ms";

const JSON_TYPE = "application/json";
const PROTO_TYPE = "application/proto";

/** The codec of a Connect unary POST by its content type (`binary`: protobuf); undefined for anything else. */
export function connectUnaryFormat(contentType: string | undefined): { binary: boolean } | undefined {
  const type = contentType === undefined ? undefined : parseContentType(contentType);
  return type === undefined || type.stream ? undefined : { binary: type.binary };
}

/** A Connect unary POST as the edge hands it on: admitted (or refused), its message still to read. */
export interface ConnectCall extends PipelineCall {
  header(name: string): string | undefined;
  /** Reads and checks the one request message with the request's compression (null: none). */
  message(compression: Compression | null): Promise<RpcMessage>;
}

/** Serves one Connect unary POST of a registry RPC (`binary`: protobuf, else JSON). */
export async function serveConnect(call: ConnectCall, binary: boolean, options: LeanOptions): Promise<HttpAnswer> {
  const output = call.operation.method.output;
  const timeout = parseTimeout(call.header(headerTimeout) ?? null, Number.MAX_SAFE_INTEGER);
  const compression = compressionNegotiate(
    [...options.acceptCompression],
    call.header(headerEncoding) ?? null,
    call.header(headerAcceptEncoding) ?? null,
    headerAcceptEncoding,
  );
  const headers: Record<string, string> = { "content-type": binary ? PROTO_TYPE : JSON_TYPE };
  const { status, body } = await runPipeline(call, {
    refusal: compression.error ?? timeout.error,
    timeoutMs: timeout.timeoutMs,
    decode: async () => messageOf(await call.message(compression.request)),
    encode: (result) => {
      const body = binary ? binaryResult(output, result) : jsonResult(output, result);
      setResultHeaders(result, (name, value) => {
        headers[name] = value;
      });
      return { status: 200, body };
    },
    fail: (err) => {
      const error = callerConnectError(err, options.logger, call.record.rpc ?? "", call.record);
      headers["content-type"] = JSON_TYPE;
      error.metadata.forEach((value, name) => {
        headers[name] = value;
      });
      return { answer: { status: codeToHttpStatus(error.code), body: errorToJsonBytes(error, {}) }, code: error.code };
    },
  });
  if (compression.response !== null && body.byteLength >= options.compressMinBytes) {
    headers[headerEncoding] = compression.response.name;
    return { status, headers, body: await compression.response.compress(body) };
  }
  return { status, headers, body };
}
