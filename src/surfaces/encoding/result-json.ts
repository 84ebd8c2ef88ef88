/**
 * An operation's result as the JSON REST answers (and MCP's tools, which answer what REST does): a stored
 * definition as its stored JSON bytes with the registry's `meta` spliced in (definition-meta.ts), a page of them
 * joined into `{"total": n, "data": [...]}`, an agent card as A2A's JSON, any other message serialized with its
 * wrapper members shown even when empty.
 */
import { type DescMessage, type JsonObject, ScalarType, toJson } from "@bufbuild/protobuf";
import { AiCatalogSchema } from "../../../gen/asor/v1/ai_catalog_pb.js";
import { agentCardJson } from "../../domain/agent-card.js";
import { AI_CATALOG_MEDIA_TYPE } from "../../domain/ai-catalog.js";
import { utf8 } from "../../http/http-answer.js";
import type { Result } from "../../operations/operation.js";
import { jsonWithMeta, pageJson } from "./definition-meta.js";

/** The media types of the answers a standard names one of its own for, by their message. */
const MEDIA_TYPES: ReadonlyMap<string, string> = new Map([[AiCatalogSchema.typeName, AI_CATALOG_MEDIA_TYPE]]);

/** The media type (without parameters) of REST's JSON of a message of type `output`: JSON, or a standard's own. */
export function jsonMediaType(output: DescMessage): string {
  return MEDIA_TYPES.get(output.typeName) ?? "application/json";
}

/** The JSON bytes of `result` of an RPC whose response is `output`. A stream's events have none. */
export function resultJson(result: Result, output: DescMessage): Uint8Array {
  switch (result.kind) {
    case "definition":
      return jsonWithMeta(result.stored);
    case "page": {
      const { total, data, nextPageToken, revision } = result.page;
      return pageJson(total, data, nextPageToken, revision);
    }
    case "message":
      return utf8(JSON.stringify(withTopLevelDefaults(output, toJson(output, result.message) as JsonObject)));
    case "card":
      return utf8(JSON.stringify(agentCardJson(result.card)));
    case "events":
      throw new Error("A stream's events are not one JSON answer.");
  }
}

/**
 * A wrapper response (a list of tenants) shows each of its own members even
 * when zero or empty; messages inside keep protobuf JSON's rule of leaving
 * unset members out, so they read back as sent.
 */
function withTopLevelDefaults(desc: DescMessage, body: JsonObject): JsonObject {
  for (const field of desc.fields) {
    if (body[field.jsonName] !== undefined) continue;
    if (field.fieldKind === "list") body[field.jsonName] = [];
    else if (field.fieldKind === "scalar")
      body[field.jsonName] = field.scalar === ScalarType.STRING ? "" : field.scalar === ScalarType.BOOL ? false : 0;
  }
  return body;
}
