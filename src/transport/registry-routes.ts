/**
 * The registry's RPCs on Connect's router (gRPC, gRPC-Web, Connect): every
 * method is its operation, run with the call the edge admitted. There is no
 * other way in: an RPC reached without the edge's verdict fails.
 */
import {
  create,
  type DescMessage,
  type DescMethod,
  type DescService,
  type JsonReadOptions,
  type JsonWriteOptions,
  type Message,
} from "@bufbuild/protobuf";
import { type ConnectRouter, createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { AGENT_CARD_CACHE_CONTROL } from "../domain/agent-card.js";
import { etagOf } from "../domain/lifecycle.js";
import type { StoredDefinition } from "../domain/records.js";
import { REVISION_HEADER } from "../http/http-answer.js";
import type { Logger } from "../logger.js";
import { recordOf } from "../observability/request-record.js";
import { type Admission, type Call, type Operations, type Result, runOperation } from "../operations/operation.js";
import { REGISTRY_SERVICES } from "../operations/registry-operations.js";
import { callerConnectError, errorInterceptor } from "./connect-errors.js";
import { definitionWithMeta, jsonWithMeta, pageJson } from "./definition-meta.js";
import { createStoredJson, type StoredJson } from "./stored-json.js";
import { eventMessage } from "./watch-events.js";

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
      "A registry RPC ran without the edge's verdict: it must be served through an edge (src/edge/edge.ts).",
    );
  if (verdict.error !== undefined) throw verdict.error;
  return new RpcCall(verdict.call, ctx);
}

/**
 * The admitted call with the RPC's signal: the client leaving (the edge's request signal), a cancel, and the
 * call's deadline (`grpc-timeout`, `connect-timeout-ms`). Read only when the operation reads it (a list, a
 * watch): a lean call's context makes it only then.
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

/** Set by the lean unary paths (unary-call.ts), which know the codec: no header needs reading to know it. */
export const binaryAnswerKey = createContextKey<boolean | undefined>(undefined, {
  description: "whether the call reads binary",
});

/** Whether the caller reads binary: every content type but JSON's; a Connect GET says so in `encoding`. */
function answersBinary(ctx: HandlerContext): boolean {
  const known = ctx.values.get(binaryAnswerKey);
  if (known !== undefined) return known;
  const type = ctx.requestHeader.get("content-type");
  if (type === null) return new URL(ctx.url).searchParams.get("encoding") === "proto";
  return !/^application\/(?:[a-z-]+\+)?json\b/i.test(type.trim());
}

/**
 * Where a handler called by a lean unary path (unary-call.ts) leaves an answer it already holds as bytes, for
 * the path to write as it is: the stored definition of a binary answer (written by storedDefinitionBinary), or
 * the JSON of a definition or a page. The handler then answers `placeholder`, an empty message of the output
 * type; the path writes the bytes only if the message the interceptors hand back is that placeholder (an
 * interceptor that answered another message is answered that message). Connect's router sets no slot, and its
 * calls are answered messages as before (responseOf).
 */
export interface HandedOver {
  stored?: StoredDefinition;
  json?: Uint8Array<ArrayBuffer>;
  placeholder?: Message;
}

export const handedOverKey = createContextKey<HandedOver | undefined>(undefined, {
  description: "where the handler leaves an answer it holds as bytes",
});

/** One frozen empty message per output type: what a handler answers when it handed its answer over. */
const placeholders = new Map<DescMessage, Message>();

/**
 * The placeholder answered when `result` is handed over in `slot` as bytes (a definition, binary or JSON; a page
 * as JSON); undefined when it is not (the handler answers a message).
 */
function handOver(output: DescMessage, result: Result, binary: boolean, slot: HandedOver): Message | undefined {
  if (result.kind === "definition") {
    if (binary) slot.stored = result.stored;
    else slot.json = jsonWithMeta(result.stored);
  } else if (result.kind === "page" && !binary) {
    const { total, data, nextPageToken, revision } = result.page;
    slot.json = pageJson(total, data, nextPageToken, revision);
  } else return undefined;
  let placeholder = placeholders.get(output);
  if (placeholder === undefined) placeholders.set(output, (placeholder = Object.freeze(create(output))));
  slot.placeholder = placeholder;
  return placeholder;
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
  switch (result.kind) {
    case "definition":
      return binary
        ? definitionWithMeta(result.stored)
        : storedJson.standIn(method.output, jsonWithMeta(result.stored), ctx.signal);
    case "page": {
      const { total, data, nextPageToken, revision } = result.page;
      if (!binary) return storedJson.standIn(method.output, pageJson(total, data, nextPageToken, revision), ctx.signal);
      return create(method.output as DescMessage, {
        total,
        data: data.map((d) => definitionWithMeta(d)),
        ...(nextPageToken === undefined ? {} : { nextPageToken }),
        ...(revision === undefined ? {} : { revision: BigInt(revision) }),
      });
    }
    case "message":
      return result.message;
    case "card":
      return result.card;
    case "events":
      throw new Error(`${method.name} answered a stream to a unary call.`);
  }
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
 * Every registry RPC as its operation: the one set of handlers, which Connect's router serves (gRPC-Web, Connect,
 * gRPC's JSON) and the lean gRPC path (grpc-unary.ts) calls for binary gRPC.
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
        // A single definition's ETag, as REST sends it (the same value as its meta.etag).
        if (result.kind === "definition") ctx.responseHeader.set("etag", etagOf(result.stored));
        // The tenant revision a read was made at, as REST sends it (gRPC: response metadata).
        const revision =
          result.kind === "definition" ? result.revision : result.kind === "page" ? result.page.revision : undefined;
        if (revision !== undefined) ctx.responseHeader.set(REVISION_HEADER, String(revision));
        // An agent card's caching headers, as REST sends them: a Connect GET is cached by HTTP caches like
        // a REST one.
        if (result.kind === "card") {
          ctx.responseHeader.set("etag", result.etag);
          ctx.responseHeader.set("cache-control", AGENT_CARD_CACHE_CONTROL);
        }
        const binary = answersBinary(ctx);
        const slot = ctx.values.get(handedOverKey);
        return (
          (slot !== undefined ? handOver(method.output, result, binary, slot) : undefined) ??
          responseOf(method, result, binary, ctx, storedJson)
        );
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
