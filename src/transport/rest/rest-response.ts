/**
 * REST response writing: an operation's result as the JSON the contract's
 * REST clients read. A stored definition is answered as its stored JSON bytes
 * (derived fields included, nothing rebuilt); a page of them is those bytes
 * joined into `{"total": n, "data": [...]}`; any other message is serialized
 * with its wrapper members shown even when empty.
 */
import { type DescMessage, type JsonObject, ScalarType, toJson } from "@bufbuild/protobuf";
import { type HttpAnswer, JSON_CONTENT_TYPE, utf8 } from "../../edge/http-answer.js";
import type { Result } from "../../operations/operation.js";
import { concatBytes } from "../bytes.js";

const JSON_HEADERS = { "content-type": JSON_CONTENT_TYPE };
const COMMA = utf8(",");
const DATA_END = utf8("]}");

/** `{"total":<n>,"data":[<each>,...]}`, from bytes. */
function pageBytes(total: number, items: readonly Uint8Array[]): Uint8Array {
  const chunks: Uint8Array[] = [utf8(`{"total":${total},"data":[`)];
  items.forEach((item, i) => {
    if (i > 0) chunks.push(COMMA);
    chunks.push(item);
  });
  chunks.push(DATA_END);
  return concatBytes(chunks);
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
    else if (field.fieldKind === "scalar") body[field.jsonName] = field.scalar === ScalarType.STRING ? "" : field.scalar === ScalarType.BOOL ? false : 0;
  }
  return body;
}

/**
 * The REST answer for `result` of an RPC whose response is `output`. A write
 * (POST) answers 201, with the instance's `Location` (the path it was posted
 * to, plus its id) for a definition; reads answer 200.
 */
export function restAnswer(result: Result, output: DescMessage, verb: string, pathname: string): HttpAnswer {
  const status = verb === "POST" ? 201 : 200;
  switch (result.kind) {
    case "definition": {
      if (status === 200) return { status, headers: JSON_HEADERS, body: result.stored.json };
      const location = `${pathname.replace(/\/+$/, "")}/${encodeURIComponent(result.stored.id)}`;
      return { status, headers: { ...JSON_HEADERS, location }, body: result.stored.json };
    }
    case "page":
      return {
        status,
        headers: JSON_HEADERS,
        body: pageBytes(
          result.page.total,
          result.page.data.map((d) => d.json),
        ),
      };
    case "message":
      return { status, headers: JSON_HEADERS, body: utf8(JSON.stringify(withTopLevelDefaults(output, toJson(output, result.message) as JsonObject))) };
  }
}
