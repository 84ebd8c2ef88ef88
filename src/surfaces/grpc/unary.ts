/**
 * Binary gRPC unary calls of the registry's RPCs, served by the pipeline
 * (pipeline.ts) with Connect's own protocol helpers. Connect's gRPC handler
 * ran each call through a pipeline of async iterables (split, decompress,
 * parse, invoke, serialize, compress, join, catch), a universal request and
 * response, and their conversion to and from Node's; for one message each
 * way that was the gRPC door's ceiling (BENCHMARKS.md, "Issue 19"). Here a
 * call is: the message the edge read and decoded once (pipeline/message-check.ts), the
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
import { type Compression, encodeEnvelope, envelopeCompress } from "@connectrpc/connect/protocol";
import type { HttpAnswer } from "../../http/http-answer.js";
import type { Result } from "../../operations/operation.js";
import { storedDefinitionBinary } from "../encoding/definition-meta.js";
import { binaryResult, setResultHeaders } from "../encoding/rpc-result.js";
import { messageOf, type RpcCall, type RpcOptions, runPipeline } from "../pipeline/pipeline.js";
import { callerConnectError } from "../pipeline/rpc-errors.js";
import { GRPC, grpcRequestOptions } from "./request.js";
import { setGrpcStatus } from "./status.js";

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

/** The trailers of a call answered: a copy each (the adapter keeps them until they are sent). */
const GRPC_OK = (): Record<string, string> => ({ "grpc-status": "0" });

/** Serves one binary gRPC call of a unary registry RPC. */
export function serveGrpc(call: RpcCall, options: RpcOptions): Promise<HttpAnswer> {
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
    encode: (result) => {
      const envelope = envelopeOf(output, result, compression.response, options.compressMinBytes);
      setResultHeaders(result, (name, value) => {
        headers[name] = value;
      });
      // A promise only when compressed: an await of bytes would still cost the call a turn of the microtask queue.
      return envelope instanceof Uint8Array
        ? answer(envelope, GRPC_OK())
        : envelope.then((body) => answer(body, GRPC_OK()));
    },
    fail: (err) => {
      const error = callerConnectError(err, options.logger, call.record.rpc ?? "", call.record);
      return { answer: answer(null, Object.fromEntries(setGrpcStatus(new Headers(), error))), code: error.code };
    },
  });
}
