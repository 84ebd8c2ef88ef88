/**
 * `meta` in answers: the registry's metadata of a version (its lifecycle
 * columns) spliced into the stored encodings, never stored in them and never
 * rebuilt from them. JSON: `,"meta":{...}` goes in before the stored object's
 * final `}`. Binary: the message's `meta` is set beside the stored fields,
 * kept encoded; the stored bytes have no `meta` (rows.ts's encodeDefinition
 * drops a sent one).
 */
import { create } from "@bufbuild/protobuf";
import {
  type AgentDefinition,
  AgentDefinitionSchema,
  DefinitionStatus,
  type RegistryMeta,
  RegistryMetaSchema,
} from "../../gen/asor/v1/agent_definition_pb.js";
import { etagOf } from "../domain/lifecycle.js";
import type { StoredDefinition } from "../domain/records.js";
import { concatBytes } from "./bytes.js";
import { preEncoded } from "./encoded-message.js";

const encoder = new TextEncoder();
const CLOSE = 0x7d; // "}"

/** RFC 3339, UTC, milliseconds: `2024-01-02T03:04:05.678Z`. */
function instant(date: Date): string {
  return date.toISOString();
}

/** `meta` as a message, for binary and Connect JSON answers. */
export function metaMessage(stored: StoredDefinition): RegistryMeta {
  return create(RegistryMetaSchema, {
    createdAt: instant(stored.createdAt),
    updatedAt: instant(stored.updatedAt),
    statusChangedAt: instant(stored.statusChangedAt),
    revision: stored.revision,
    status: DefinitionStatus[stored.status],
    ...(stored.statusMessage === null ? {} : { statusMessage: stored.statusMessage }),
    latest: stored.latest,
    etag: etagOf(stored),
  });
}

/**
 * `meta` as protobuf JSON, written out here (a few string joins per row, no
 * message built): the same text protobuf-es writes for metaMessage
 * (test/transport/definition-meta.test.ts holds it to that).
 */
export function metaJson(stored: StoredDefinition): string {
  const message = stored.statusMessage === null ? "" : `,"statusMessage":${JSON.stringify(stored.statusMessage)}`;
  return (
    `{"createdAt":"${instant(stored.createdAt)}","updatedAt":"${instant(stored.updatedAt)}","statusChangedAt":"${instant(stored.statusChangedAt)}",` +
    `"revision":${stored.revision},"status":"${stored.status}"${message},"latest":${stored.latest},"etag":${JSON.stringify(etagOf(stored))}}`
  );
}

/**
 * The stored JSON with `meta` spliced in as its last member, as two chunks
 * (the stored bytes up to their final `}`, a view; then `meta` and the `}`),
 * so a page joins them without copying each definition twice.
 */
export function jsonChunksWithMeta(stored: StoredDefinition): [Uint8Array, Uint8Array] {
  const json = stored.json;
  let end = json.byteLength - 1;
  while (end >= 0 && json[end] !== CLOSE) end--;
  // A stored definition always has members (its id at least), so the comma is right.
  if (end < 1) throw new Error(`The stored JSON of agent definition ${stored.id} is not an object.`);
  return [json.subarray(0, end), encoder.encode(`,"meta":${metaJson(stored)}}`)];
}

/** The stored JSON with `meta` spliced in as its last member. */
export function jsonWithMeta(stored: StoredDefinition): Uint8Array<ArrayBuffer> {
  return concatBytes(jsonChunksWithMeta(stored));
}

const COMMA = encoder.encode(",");
const DATA_END = encoder.encode("]}");

/**
 * A page as JSON, from the stored bytes: `{"total":<n>,"data":[<each>,...]}`,
 * and `"nextPageToken"` when there is a next page. The same text REST and the
 * RPCs' JSON codecs answer (their members in the order of the response message).
 */
export function pageJson(
  total: number,
  data: readonly StoredDefinition[],
  nextPageToken?: string,
): Uint8Array<ArrayBuffer> {
  const chunks: Uint8Array[] = [encoder.encode(`{"total":${total},"data":[`)];
  data.forEach((stored, i) => {
    if (i > 0) chunks.push(COMMA);
    chunks.push(...jsonChunksWithMeta(stored));
  });
  // A token is base64url: nothing in it needs escaping in JSON.
  chunks.push(nextPageToken === undefined ? DATA_END : encoder.encode(`],"nextPageToken":"${nextPageToken}"}`));
  return concatBytes(chunks);
}

/**
 * A stored definition as a message carrying its `meta`, for binary callers:
 * the stored bytes framed as they are (preEncoded; protobuf-es writes `meta`
 * and then the stored fields, and field order does not matter on the wire).
 * JSON callers are answered the stored JSON (jsonWithMeta).
 */
export function definitionWithMeta(stored: StoredDefinition): AgentDefinition {
  const message = preEncoded(AgentDefinitionSchema, stored.binary);
  message.meta = metaMessage(stored);
  return message;
}
