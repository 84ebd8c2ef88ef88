/**
 * The registry's RPCs on Connect's router (gRPC, gRPC-Web, Connect): every
 * method is its operation, run with the call the edge admitted. There is no
 * other way in: an RPC reached without the edge's verdict fails.
 */
import type { DescMethod, DescService, JsonReadOptions, JsonWriteOptions, Message } from "@bufbuild/protobuf";
import { type ConnectRouter, createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import type { Logger } from "../../logger.js";
import { recordOf } from "../../observability/request-record.js";
import { type Admission, type Call, type Operations, type Result, runOperation } from "../../operations/operation.js";
import { REGISTRY_SERVICES } from "../../operations/registry-operations.js";
import { jsonResult, resultMessage, setResultHeaders } from "../encoding/rpc-result.js";
import { createStoredJson, type StoredJson } from "../encoding/stored-json.js";
import { eventMessage } from "../encoding/watch-events.js";
import { callerConnectError, errorInterceptor } from "../pipeline/rpc-errors.js";

/**
 * Where the edge leaves its verdict for the RPC: the admitted call, or the error to answer with (401/403, a
 * bad message).
 */
export const verdictKey = createContextKey<Admission | undefined>(undefined, {
  description: "the edge's verdict on the caller and the message",
});

function callOf(ctx: HandlerContext): Call {
  const verdict = ctx.values.get(verdictKey);
  if (verdict === undefined)
    throw new Error(
      "A registry RPC ran without the edge's verdict: it must be served through an edge (src/surfaces/edge.ts).",
    );
  if (verdict.error !== undefined) throw verdict.error;
  return new RpcCall(verdict.call, ctx);
}

/**
 * The admitted call with the RPC's signal: the client leaving (the edge's request signal), a cancel, and the
 * call's deadline (`grpc-timeout`, `connect-timeout-ms`). Read only when the operation reads it (a list, a
 * watch).
 */
class RpcCall implements Call {
  constructor(
    private readonly call: Call,
    private readonly ctx: HandlerContext,
  ) {}
  get principal(): Call["principal"] {
    return this.call.principal;
  }
  get record(): Call["record"] {
    return this.call.record;
  }
  get signal(): AbortSignal {
    return this.ctx.signal;
  }
  get followToken(): Call["followToken"] {
    return this.call.followToken;
  }
  get http1(): boolean | undefined {
    return this.call.http1;
  }
}

/** Whether the caller reads binary: every content type but JSON's; a Connect GET says so in `encoding`. */
function answersBinary(ctx: HandlerContext): boolean {
  const type = ctx.requestHeader.get("content-type");
  if (type === null) return new URL(ctx.url).searchParams.get("encoding") === "proto";
  return !/^application\/(?:[a-z-]+\+)?json\b/i.test(type.trim());
}

/**
 * The RPC's response for an operation's result. Definitions are answered from
 * their stored bytes: binary as they are (preEncoded), JSON through a stand-in
 * for the stored JSON (stored-json.ts), never decoded into messages.
 */
function responseOf(
  method: DescMethod,
  result: Result,
  binary: boolean,
  ctx: HandlerContext,
  storedJson: StoredJson,
): Message {
  if (!binary && (result.kind === "definition" || result.kind === "page"))
    return storedJson.standIn(method.output, jsonResult(method.output, result), ctx.signal);
  return resultMessage(method.output, result);
}

export interface RegistryRoutesOptions {
  readonly operations: Operations;
  readonly logger: Logger;
}

/**
 * Connect's JSON options as its serialization reads them: protobuf-es's, and the text encoder (Connect's
 * JsonSerializationOptions, which its router options do not name).
 */
export type RpcJsonOptions = Partial<JsonReadOptions & JsonWriteOptions> & {
  readonly textEncoder?: { encode(input?: string): Uint8Array };
};

/** One registry service as Connect's router takes it: its implementation and its options (the error mapping). */
export interface RegistryServiceImpl {
  readonly service: DescService;
  readonly implementation: Record<
    string,
    | ((req: Message, ctx: HandlerContext) => Promise<Message>)
    | ((req: Message, ctx: HandlerContext) => AsyncIterable<Message>)
  >;
  readonly options: { readonly interceptors: Interceptor[]; readonly jsonOptions: RpcJsonOptions };
}

/**
 * Every registry RPC as its operation, for Connect's router: what the edge does not serve itself (gRPC-Web,
 * Connect GET, gRPC's JSON codec).
 */
export function createRegistryImplementations({ operations, logger }: RegistryRoutesOptions): RegistryServiceImpl[] {
  const storedJson = createStoredJson();
  const options = {
    interceptors: [errorInterceptor(logger)],
    // Unknown JSON members are refused by the edge's check, with their paths, before Connect decodes.
    // The encoder writes the stored JSON of the stand-ins responseOf answers.
    jsonOptions: { ignoreUnknownFields: false, textEncoder: storedJson.textEncoder },
  };
  return REGISTRY_SERVICES.map((service) => {
    const implementation: RegistryServiceImpl["implementation"] = {};
    for (const method of service.methods) {
      const operation = operations.get(method);
      if (operation === undefined) throw new Error(`${service.typeName}/${method.name} has no operation.`);
      if (method.methodKind === "server_streaming") {
        // The watch: each event as its own message, until the events end (or fail: the stream's status).
        implementation[method.localName] = async function* stream(req: Message, ctx: HandlerContext) {
          // The error interceptor sees a stream's start, not its end: errors after the first event are mapped here.
          try {
            const result = await runOperation(operation, callOf(ctx), req as never);
            if (result.kind !== "events") throw new Error(`${method.name} answered no stream.`);
            const binary = answersBinary(ctx);
            for await (const batch of result.events) for (const event of batch) yield eventMessage(event, binary);
          } catch (err) {
            const procedure = `${service.typeName}/${method.name}`;
            throw callerConnectError(err, logger, procedure, recordOf(ctx.values));
          }
        };
        continue;
      }
      implementation[method.localName] = async (req, ctx) => {
        const result = await runOperation(operation, callOf(ctx), req as never);
        setResultHeaders(result, (name, value) => ctx.responseHeader.set(name, value));
        return responseOf(method, result, answersBinary(ctx), ctx, storedJson);
      };
    }
    return { service, implementation, options };
  });
}

/** Registers every registry RPC (`implementations`) on Connect's router. */
export function registryRoutes(implementations: readonly RegistryServiceImpl[]): (router: ConnectRouter) => void {
  return (router) => {
    for (const { service, implementation, options } of implementations)
      router.service(service, implementation as never, options);
  };
}
