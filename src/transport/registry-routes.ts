/**
 * The registry's RPCs on Connect's router (gRPC, gRPC-Web, Connect): every
 * method is its operation, run with the call the edge admitted. There is no
 * other way in: an RPC reached without the edge's verdict fails.
 */
import { create, type DescMessage, type DescMethod, fromBinary, type Message } from "@bufbuild/protobuf";
import { type ConnectRouter, createContextKey, type HandlerContext } from "@connectrpc/connect";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import type { StoredDefinition } from "../domain/records.js";
import type { Logger } from "../logger.js";
import type { Admission, Call, Operations, Result } from "../operations/operation.js";
import { REGISTRY_SERVICES } from "../operations/registry-operations.js";
import { errorInterceptor } from "./connect-errors.js";
import { preEncoded } from "./encoded-message.js";

/** Where the edge leaves its verdict for the RPC: the admitted call, or the error to answer with (401/403, a bad message). */
export const verdictKey = createContextKey<Admission | undefined>(undefined, { description: "the edge's verdict on the caller and the message" });

function callOf(ctx: HandlerContext): Call {
  const verdict = ctx.values.get(verdictKey);
  if (verdict === undefined) throw new Error("A registry RPC ran without the edge's verdict: it must be served through an edge (src/edge/edge.ts).");
  if (verdict.error !== undefined) throw verdict.error;
  return verdict.call;
}

/** Whether the caller reads binary: every content type but JSON's; a Connect GET says so in `encoding`. */
function answersBinary(ctx: HandlerContext): boolean {
  const type = ctx.requestHeader.get("content-type");
  if (type === null) return new URL(ctx.url).searchParams.get("encoding") === "proto";
  return !/^application\/(?:[a-z-]+\+)?json\b/i.test(type.trim());
}

/** A stored definition as a message: its stored binary as it is for binary callers, decoded for JSON (Connect writes the JSON). */
function definitionMessage(stored: StoredDefinition, binary: boolean): Message {
  return binary ? preEncoded(AgentDefinitionSchema, stored.binary) : fromBinary(AgentDefinitionSchema, stored.binary);
}

/** The RPC's response for an operation's result. */
function responseOf(method: DescMethod, result: Result, binary: boolean): Message {
  switch (result.kind) {
    case "definition":
      return definitionMessage(result.stored, binary);
    case "page":
      return create(method.output as DescMessage, { total: result.page.total, data: result.page.data.map((d) => definitionMessage(d, binary)) });
    case "message":
      return result.message;
  }
}

export interface RegistryRoutesOptions {
  readonly operations: Operations;
  readonly logger: Logger;
}

/** Registers every registry RPC as its operation. */
export function createRegistryRoutes({ operations, logger }: RegistryRoutesOptions): (router: ConnectRouter) => void {
  const options = {
    interceptors: [errorInterceptor(logger)],
    // Unknown JSON members are refused by the edge's check, with their paths, before Connect decodes.
    jsonOptions: { ignoreUnknownFields: false },
  };
  return (router) => {
    for (const service of REGISTRY_SERVICES) {
      const implementation: Record<string, (req: Message, ctx: HandlerContext) => Promise<Message>> = {};
      for (const method of service.methods) {
        const operation = operations.get(method);
        if (operation === undefined) throw new Error(`${service.typeName}/${method.name} has no operation.`);
        implementation[method.localName] = async (req, ctx) => responseOf(method, await operation.run(callOf(ctx), req as never), answersBinary(ctx));
      }
      router.service(service, implementation as never, options);
    }
  };
}
