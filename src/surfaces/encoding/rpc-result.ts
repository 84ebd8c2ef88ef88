/**
 * An operation's result as the RPC surfaces answer it, whichever protocol
 * carries it: the answer's headers (what REST sends too) and the message's
 * bytes. Definitions are answered from their stored bytes, never decoded into
 * messages: binary as stored with `meta` spliced in (storedDefinitionBinary),
 * JSON as stored (jsonWithMeta), a page as those joined (pageJson).
 */
import { create, type DescMessage, type Message, toBinary, toJsonString } from "@bufbuild/protobuf";
import { AGENT_CARD_CACHE_CONTROL } from "../../domain/agent-card.js";
import { etagOf } from "../../domain/lifecycle.js";
import { REVISION_HEADER } from "../../http/http-answer.js";
import type { Result } from "../../operations/operation.js";
import { definitionWithMeta, jsonWithMeta, pageJson, storedDefinitionBinary } from "./definition-meta.js";

/**
 * Sets the headers an RPC answers `result` with, as REST sends them: a single definition's ETag (the same value
 * as its meta.etag), the tenant revision a read was made at (gRPC: response metadata), and an agent card's
 * ETag and caching (a Connect GET is cached by HTTP caches like a REST one).
 */
export function setResultHeaders(result: Result, set: (name: string, value: string) => void): void {
  if (result.kind === "definition") set("etag", etagOf(result.stored));
  const revision =
    result.kind === "definition" ? result.revision : result.kind === "page" ? result.page.revision : undefined;
  if (revision !== undefined) set(REVISION_HEADER, String(revision));
  if (result.kind === "card") {
    set("etag", result.etag);
    set("cache-control", AGENT_CARD_CACHE_CONTROL);
  }
}

/** The answer message of `result` of an RPC whose response is `output` (a page's definitions kept encoded). */
export function resultMessage(output: DescMessage, result: Result): Message {
  switch (result.kind) {
    case "definition":
      return definitionWithMeta(result.stored);
    case "page": {
      const { total, data, nextPageToken, revision } = result.page;
      return create(output, {
        total,
        data: data.map((d) => definitionWithMeta(d)),
        ...(nextPageToken === undefined ? {} : { nextPageToken }),
        ...(revision === undefined ? {} : { revision: BigInt(revision) }),
      } as never);
    }
    case "message":
      return result.message;
    case "card":
      return result.card;
    case "events":
      throw new Error(`${output.typeName} answered a stream to a unary call.`);
  }
}

/** `result`'s answer in protobuf's binary encoding (a definition's stored bytes written once). */
export function binaryResult(output: DescMessage, result: Result): Uint8Array {
  if (result.kind === "definition") return storedDefinitionBinary(result.stored);
  return toBinary(output, resultMessage(output, result));
}

const utf8 = new TextEncoder();

/** `result`'s answer as JSON: a definition's or a page's stored JSON as it is, any other message by protobuf-es. */
export function jsonResult(output: DescMessage, result: Result): Uint8Array<ArrayBuffer> {
  if (result.kind === "definition") return jsonWithMeta(result.stored);
  if (result.kind === "page") {
    const { total, data, nextPageToken, revision } = result.page;
    return pageJson(total, data, nextPageToken, revision);
  }
  return utf8.encode(toJsonString(output, resultMessage(output, result)));
}
