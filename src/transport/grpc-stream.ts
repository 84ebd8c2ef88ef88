/**
 * The lean gRPC watch: binary gRPC calls of the registry's server-streaming RPC (WatchAgentDefinitions), served
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
 * `grpc-status-details-bin` trailers. Errors are mapped as the error interceptor maps them (callerConnectError)
 * and the request's record is kept as the record interceptor keeps it, without the interceptors' chain: a
 * stream's interceptors see its start only, not its end.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import type { Compression } from "@connectrpc/connect/protocol";
import type { WatchEvent } from "../domain/watch.js";
import type { StreamAnswer } from "../http/http-answer.js";
import { codeName, type RequestRecord } from "../observability/request-record.js";
import { type Admission, type Operation, runOperation } from "../operations/operation.js";
import { callerConnectError } from "./connect-errors.js";
import { setGrpcStatus } from "./grpc-status.js";
import { GRPC, grpcRequestOptions, type LeanOptions } from "./grpc-unary.js";
import { callSignal, readFailure, type UnaryMessage } from "./unary-call.js";
import { grpcEvents } from "./watch-events.js";

/** A server-streaming call as the edge hands it on: admitted (or refused), its message still to read. */
export interface StreamCall {
  readonly method: DescMethod;
  readonly operation: Operation;
  readonly admission: Admission;
  readonly record: RequestRecord;
  header(name: string): string | undefined;
  /** Aborts when the client goes away. */
  readonly signal: AbortSignal | undefined;
  /** Reads and checks the one request message with the request's compression (null: none). */
  message(compression: Compression | null): Promise<UnaryMessage>;
}

/** Serves one binary gRPC call of a server-streaming registry RPC. */
export async function serveGrpcStream(call: StreamCall, options: LeanOptions): Promise<StreamAnswer> {
  const procedure = `${call.method.parent.typeName}/${call.method.name}`;
  const { record } = call;
  record.rpc ??= procedure;
  const headers: Record<string, string> = { "content-type": GRPC.contentType };
  const trailers = new Headers();
  const { compression, timeout } = grpcRequestOptions(call, options);
  if (compression.response !== null) headers["grpc-encoding"] = compression.response.name;
  // The call's signal: the client leaving, and the deadline when one was asked.
  const { signal, done } = callSignal(call.signal, timeout.timeoutMs);
  const end = (err: unknown): void => {
    const failure = err === undefined ? undefined : callerConnectError(err, options.logger, procedure, record);
    setGrpcStatus(trailers, failure);
    record.code ??= codeName(failure?.code ?? 0);
    done();
  };
  const answer = (body: AsyncIterable<readonly Uint8Array[]>): StreamAnswer => ({
    status: 200,
    headers,
    body,
    trailers: () => Object.fromEntries(trailers),
  });

  let events: AsyncIterable<readonly WatchEvent[]>;
  try {
    // The protocol's own refusals first, as Connect's handler raises them; then the caller's, then the message's.
    if (compression.error !== undefined) throw compression.error;
    if (timeout.error !== undefined) throw timeout.error;
    if (call.admission.error !== undefined) throw call.admission.error;
    const read = await call.message(compression.request);
    if (read.failure !== undefined) throw readFailure(read.failure);
    if (read.problem !== undefined) throw read.problem;
    const result = await runOperation(call.operation, { ...call.admission.call, signal }, read.message as never);
    if (result.kind !== "events") throw new Error(`${call.method.name} answered no stream.`);
    events = result.events;
  } catch (err) {
    end(err);
    return answer((async function* none(): AsyncGenerator<readonly Uint8Array[]> {})());
  }

  const minBytes = options.compressMinBytes;
  return answer(
    (async function* body(): AsyncGenerator<readonly Uint8Array[]> {
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
    })(),
  );
}
