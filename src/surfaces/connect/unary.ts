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
import type { HttpAnswer } from "../../http/http-answer.js";
import { binaryResult, jsonResult, setResultHeaders } from "../encoding/rpc-result.js";
import { messageOf, type RpcCall, type RpcOptions, runPipeline } from "../pipeline/pipeline.js";
import { callerConnectError } from "../pipeline/rpc-errors.js";
import { connectRequestOptions, headerEncoding } from "./request.js";
import { connectErrorAnswer } from "./status.js";

const JSON_TYPE = "application/json";
const PROTO_TYPE = "application/proto";

/** Serves one Connect unary POST of a registry RPC (`binary`: protobuf, else JSON). */
export async function serveConnect(call: RpcCall, binary: boolean, options: RpcOptions): Promise<HttpAnswer> {
  const output = call.operation.method.output;
  const { timeout, compression } = connectRequestOptions(call, options);
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
      return { answer: connectErrorAnswer(error, headers), code: error.code };
    },
  });
  if (compression.response !== null && body.byteLength >= options.compressMinBytes) {
    headers[headerEncoding] = compression.response.name;
    return { status, headers, body: await compression.response.compress(body) };
  }
  return { status, headers, body };
}
