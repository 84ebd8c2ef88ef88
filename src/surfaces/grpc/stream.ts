/**
 * The gRPC watch: binary gRPC calls of the registry's server-streaming RPC (WatchAgentDefinitions), served
 * with the same operation as every other surface but without Connect's handler. Through Connect each event
 * went to each watcher as its own message: serialized per watcher (toBinary of the definition a thousand
 * times for a thousand watchers), enveloped and written one by one through a pipeline of async iterables per
 * stream; with 1,000 gRPC watchers the service used 131 % CPU for 20 writes a second and held 70 MiB more than
 * idle (BENCHMARKS.md, "Watch (issue 20)"). Here each change's message is encoded once for all watchers
 * (watch-events.ts grpcEvents), a watcher's batch (what was ready at once) is one write of those shared
 * envelopes, and a stream holds one loop.
 *
 * What Connect's gRPC handler answers, this answers too: `application/grpc+proto`, `grpc-encoding` negotiation
 * (gzip and br; messages under COMPRESS_MIN_BYTES plain), a `grpc-timeout` deadline (DEADLINE_EXCEEDED when it
 * passes), and every failure (before the first event or after) as `grpc-status`, `grpc-message` and
 * `grpc-status-details-bin` trailers. The pipeline (pipeline.ts) decodes, admits and runs; a failure is mapped
 * once (callerConnectError) and the request's record given its code when the stream ends.
 */
import type { ConnectError } from "@connectrpc/connect";
import type { WatchEvent } from "../../domain/watch.js";
import type { StreamAnswer } from "../../http/http-answer.js";
import { codeName } from "../../observability/request-record.js";
import { grpcEvents } from "../encoding/watch-events.js";
import { callSignal, messageOf, type RpcCall, type RpcOptions, runPipeline } from "../pipeline/pipeline.js";
import { callerConnectError } from "../pipeline/rpc-errors.js";
import { GRPC, grpcRequestOptions } from "./request.js";
import { setGrpcStatus } from "./status.js";

/** Serves one binary gRPC call of a server-streaming registry RPC. */
export function serveGrpcStream(call: RpcCall, options: RpcOptions): Promise<StreamAnswer> {
  const { record } = call;
  const headers: Record<string, string> = { "content-type": GRPC.contentType };
  const trailers = new Headers();
  const { compression, timeout } = grpcRequestOptions(call, options);
  if (compression.response !== null) headers["grpc-encoding"] = compression.response.name;
  // The call's signal: the client leaving, and the deadline when one was asked; it lasts as long as the stream.
  const { signal, done } = callSignal(call.signal, timeout.timeoutMs);
  const end = (err: unknown): ConnectError | undefined => {
    const failure = err === undefined ? undefined : callerConnectError(err, options.logger, record.rpc ?? "", record);
    setGrpcStatus(trailers, failure);
    record.code = codeName(failure?.code ?? 0);
    done();
    return failure;
  };
  const answer = (body: AsyncIterable<readonly Uint8Array[]>): StreamAnswer => ({
    status: 200,
    headers,
    body,
    trailers: () => Object.fromEntries(trailers),
  });
  const minBytes = options.compressMinBytes;

  return runPipeline(call, {
    // The protocol's own refusals first, as Connect's handler raises them; then the caller's, then the message's.
    refusal: compression.error ?? timeout.error,
    signal,
    decode: async () => messageOf(await call.message(compression.request)),
    encode: (result) => {
      if (result.kind !== "events") throw new Error(`${call.operation.method.name} answered no stream.`);
      return answer(eventsBody(result.events));
    },
    fail: (err) => {
      const failure = end(err) as ConnectError;
      return {
        answer: answer((async function* none(): AsyncGenerator<readonly Uint8Array[]> {})()),
        code: failure.code,
      };
    },
  });

  async function* eventsBody(events: AsyncIterable<readonly WatchEvent[]>): AsyncGenerator<readonly Uint8Array[]> {
    let failure: unknown;
    try {
      for await (const batch of events) yield await grpcEvents(batch, compression.response, minBytes);
    } catch (err) {
      failure = err;
    } finally {
      // The events end when the call's signal aborts: a deadline that passed is the caller's answer, a client
      // that left reads none (its record says canceled).
      if (failure === undefined && signal?.aborted === true) failure = signal.reason;
      end(failure);
    }
  }
}
