/**
 * `meta` in answers: the registry's metadata of a version (its lifecycle
 * columns) spliced into the stored encodings, never stored in them and never
 * rebuilt from them. JSON: `,"meta":{...}` goes in before the stored object's
 * final `}`. Binary: the encoded `meta` field (field 20) goes after the stored
 * bytes; protobuf concatenation merges, and the stored bytes have no field 20
 * (rows.ts's encodeDefinition drops a sent `meta`).
 */
import { create, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { DefinitionStatus, type RegistryMeta, RegistryMetaSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { etagOf } from "../domain/lifecycle.js";
import type { StoredDefinition } from "../domain/records.js";
import { concatBytes } from "./bytes.js";

/** The field number of `meta` in asor.v1.AgentDefinition. */
const META_FIELD = 20;

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
export function jsonWithMeta(stored: StoredDefinition): Uint8Array {
  return concatBytes(jsonChunksWithMeta(stored));
}

/** The stored binary with the `meta` field appended. */
export function binaryWithMeta(stored: StoredDefinition): Uint8Array {
  const meta = toBinary(RegistryMetaSchema, metaMessage(stored));
  const field = new BinaryWriter().tag(META_FIELD, WireType.LengthDelimited).bytes(meta).finish();
  return concatBytes([stored.binary, field]);
}
