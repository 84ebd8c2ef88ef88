/**
 * The one pipeline of every surface the edge serves itself (REST and its
 * SSE watch, binary gRPC unary and watch, Connect unary POSTs). Each request
 * takes the same four steps:
 *
 * 1. decode: the request's message, as the operation's input (the protocol's
 *    own refusals, read from its headers, come first);
 * 2. admit: the edge's verdict on the caller, reached before any body was
 *    read (edge.ts), raised here in its turn;
 * 3. run: the operation, once (runOperation);
 * 4. encode: its result, or any failure of the steps, in the surface's own
 *    protocol.
 *
 * The request's record and the error mapping wrap the operation here, once:
 * no interceptor chain, no answer travelling around a handler. Connect's
 * router keeps what the edge does not serve itself, with its interceptors.
 */
import type { Message } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Compression, createDeadlineSignal, createLinkedAbortController } from "@connectrpc/connect/protocol";
import type { RegistryError } from "../../domain/errors.js";
import type { Logger } from "../../logger.js";
import { codeName, type RequestRecord } from "../../observability/request-record.js";
import { type Admission, type Call, type Operation, type Result, runOperation } from "../../operations/operation.js";

/** A call on its way through the pipeline: its operation, the edge's verdict on its caller, its record. */
export interface PipelineCall {
  readonly operation: Operation;
  readonly admission: Admission;
  readonly record: RequestRecord;
}

/** An RPC call as the edge hands it on: admitted (or refused), its one message still to read. */
export interface RpcCall extends PipelineCall {
  /** A request header by its lower-case name. */
  header(name: string): string | undefined;
  /** Aborts when the client goes away. */
  readonly signal: AbortSignal | undefined;
  /** Reads and checks the one request message with the request's compression (null: none). */
  message(compression: Compression | null): Promise<RpcMessage>;
}

/** What a surface does at each step of its own. */
export interface SurfaceSteps<Answer> {
  /**
   * The protocol's own refusal read from the request's headers (an unknown encoding, a malformed deadline),
   * answered before the caller's, as Connect's handlers raise them.
   */
  readonly refusal?: unknown;
  /**
   * The deadline the request asks for (`grpc-timeout`, `connect-timeout-ms`): the call's signal aborts then;
   * the deadline ends once the answer is made.
   */
  readonly timeoutMs?: number | undefined;
  /** A stream's signal, with the deadline it keeps until the stream ends (instead of `timeoutMs`). */
  readonly signal?: AbortSignal | undefined;
  /** Step 1: the request's message, the operation's input. */
  decode(): Promise<Message>;
  /** Step 4: the operation's result in the surface's protocol. */
  encode(result: Result): Answer | Promise<Answer>;
  /** Step 4, failed: any failure of the steps in the surface's protocol, and the RPC code it answers. */
  fail(err: unknown): Failed<Answer>;
}

/** A failure's answer in the surface's protocol, and its RPC code (the access line's). */
export interface Failed<Answer> {
  readonly answer: Answer;
  readonly code: Code;
}

/** `${service}/${method}` of an operation: the access line's and the error log's name of the call. */
export function procedureOf(operation: Operation): string {
  return `${operation.method.parent.typeName}/${operation.method.name}`;
}

/** Runs the four steps for `call`, the surface's own (`steps`) around the operation. */
export async function runPipeline<Answer>(call: PipelineCall, steps: SurfaceSteps<Answer>): Promise<Answer> {
  const { record, admission } = call;
  record.rpc ??= procedureOf(call.operation);
  let deadline: { done(): void } | undefined;
  try {
    if (steps.refusal !== undefined) throw steps.refusal;
    if (admission.error !== undefined) throw admission.error;
    let admitted = admission.call;
    if (steps.timeoutMs !== undefined) {
      const signalled = callSignal(admitted.signal, steps.timeoutMs);
      deadline = signalled;
      admitted = new DeadlineCall(admitted, signalled.signal as AbortSignal);
    } else if (steps.signal !== undefined) admitted = new DeadlineCall(admitted, steps.signal);
    const input = await steps.decode();
    const result = await runOperation(call.operation, admitted, input as never);
    const encoded = steps.encode(result);
    // Awaited only when it is a promise: an await of an answer would still cost a turn of the microtask queue.
    const answer = encoded instanceof Promise ? await encoded : encoded;
    record.code ??= codeName(0);
    return answer;
  } catch (err) {
    const failed = steps.fail(err);
    record.code ??= codeName(failed.code);
    return failed.answer;
  } finally {
    deadline?.done();
  }
}

/** An admitted call whose signal also aborts at its deadline. */
class DeadlineCall implements Call {
  constructor(
    private readonly call: Call,
    readonly signal: AbortSignal,
  ) {}
  get principal(): Call["principal"] {
    return this.call.principal;
  }
  get record(): Call["record"] {
    return this.call.record;
  }
  get followToken(): Call["followToken"] {
    return this.call.followToken;
  }
  get http1(): boolean | undefined {
    return this.call.http1;
  }
  get watchKey(): string | undefined {
    return this.call.watchKey;
  }
}

/** What an RPC surface reads of a request: the message, or why there is none. */
export type RpcMessage =
  | { readonly message: Message; readonly problem?: undefined; readonly failure?: undefined }
  | { readonly message?: undefined; readonly problem: RegistryError; readonly failure?: undefined }
  | { readonly message?: undefined; readonly problem?: undefined; readonly failure: unknown };

/** The message of `read`, or its problem (the registry's error) or failure (readFailure) thrown. */
export function messageOf(read: RpcMessage): Message {
  if (read.failure !== undefined) throw readFailure(read.failure);
  if (read.problem !== undefined) throw read.problem;
  return read.message as Message;
}

/**
 * What a body that could not be read whole answers: a broken envelope is Connect's own error; anything else is
 * the client's connection failing under it, no fault of the service (CANCELED).
 */
export function readFailure(failure: unknown): ConnectError {
  return failure instanceof ConnectError ? failure : ConnectError.from(failure, Code.Canceled);
}

/** What the RPC surfaces the edge serves itself share: the router's compressions, and where failures are logged. */
export interface RpcOptions {
  /** Where a failure is logged. */
  readonly logger: Logger;
  /** The compressions accepted and answered with (the router's). */
  readonly acceptCompression: readonly Compression[];
  /** Answers smaller than this go uncompressed (the router's compressMinBytes). */
  readonly compressMinBytes: number;
}

/**
 * Why a call's deadline signal is aborted once it is answered (nothing listens by then; Connect's handler does
 * too).
 */
const CALL_OVER = new ConnectError("the call is over", Code.Canceled);

/** A call without a deadline ends with nothing to stop. */
const NOTHING_TO_END = (): void => {};

/**
 * A call's signal: the request's own (`signal`), or with a timeout one linked signal that also aborts at the
 * deadline, as Connect links them; `done` ends the deadline's timer once the call is over. Connect's handlers
 * linked an AbortController per call that aborted without a reason when it ended (a DOMException with a stack:
 * 36 µs a call in the profile, BENCHMARKS.md "Issue 19").
 */
export function callSignal(
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
): { signal: AbortSignal | undefined; done(): void } {
  if (timeoutMs === undefined) return { signal, done: NOTHING_TO_END };
  const deadline = createDeadlineSignal(timeoutMs);
  const linked = createLinkedAbortController(deadline.signal, signal);
  return {
    signal: linked.signal,
    // With a reason of its own: an abort without one builds a DOMException with a stack.
    done: () => {
      deadline.cleanup();
      linked.abort(CALL_OVER);
    },
  };
}
