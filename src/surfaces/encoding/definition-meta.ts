/**
 * `meta` in answers: the registry's metadata of a version (its lifecycle
 * columns) spliced into the stored encodings, never stored in them and never
 * rebuilt from them. JSON: `,"meta":{...}` goes in before the stored object's
 * final `}`. Binary: the message's `meta` is set beside the stored fields,
 * kept encoded; the stored bytes have no `meta` (rows.ts's encodeDefinition
 * drops a sent one).
 */
import { create, fromJsonString, toBinary } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import {
  type AgentDefinition,
  AgentDefinitionSchema,
  DefinitionStatus,
  type Liveness,
  LivenessSchema,
  LivenessState,
  type RegistryMeta,
  RegistryMetaSchema,
} from "../../../gen/asor/v1/agent_definition_pb.js";
import { etagOf } from "../../domain/lifecycle.js";
import type { StoredDefinition } from "../../domain/records.js";
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
    modRevision: BigInt(stored.modRevision),
    status: DefinitionStatus[stored.status],
    ...(stored.statusMessage === null ? {} : { statusMessage: stored.statusMessage }),
    latest: stored.latest,
    etag: etagOf(stored),
    liveness: livenessMessage(stored),
  });
}

/**
 * `meta.liveness` (issue 44): the stored JSON (written by protobuf-es when the prober set it, so the text
 * answers carry it as it is), NOT_PROBED when there is none.
 */
function livenessMessage(stored: StoredDefinition): Liveness {
  return stored.liveness == null
    ? create(LivenessSchema, { state: LivenessState.NOT_PROBED })
    : fromJsonString(LivenessSchema, stored.liveness);
}

/** What a version never probed answers as `meta.liveness`, in JSON and in binary. */
const NOT_PROBED_JSON = '{"state":"NOT_PROBED"}';
const NOT_PROBED_BINARY = toBinary(LivenessSchema, create(LivenessSchema, { state: LivenessState.NOT_PROBED }));

/**
 * The binary of the stored liveness JSONs read lately, by their text (which changes only with the version's state
 * or drift): a version read again, as the hot ones are, does not have its liveness parsed and encoded again.
 * Emptied when it reaches its bound.
 */
const livenessBinaries = new Map<string, Uint8Array>();
const LIVENESS_BINARIES = 1_000;

/** `meta.liveness` in protobuf binary. */
function livenessBinary(stored: StoredDefinition): Uint8Array {
  const json = stored.liveness;
  if (json == null) return NOT_PROBED_BINARY;
  let binary = livenessBinaries.get(json);
  if (binary === undefined) {
    if (livenessBinaries.size >= LIVENESS_BINARIES) livenessBinaries.clear();
    livenessBinaries.set(json, (binary = toBinary(LivenessSchema, livenessMessage(stored))));
  }
  return binary;
}

/**
 * `meta` as protobuf JSON, written out here (a few string joins per row, no
 * message built): the same text protobuf-es writes for metaMessage
 * (test/surfaces/definition-meta.test.ts holds it to that).
 */
export function metaJson(stored: StoredDefinition): string {
  const message = stored.statusMessage === null ? "" : `,"statusMessage":${JSON.stringify(stored.statusMessage)}`;
  // An int64: a string in protobuf JSON, left out when 0 as protobuf-es leaves it.
  const modRevision = stored.modRevision === 0 ? "" : `,"modRevision":"${stored.modRevision}"`;
  return (
    `{"createdAt":"${instant(stored.createdAt)}","updatedAt":"${instant(stored.updatedAt)}",` +
    `"statusChangedAt":"${instant(stored.statusChangedAt)}",` +
    `"revision":${stored.revision},"status":"${stored.status}"${message},"latest":${stored.latest},` +
    `"etag":${JSON.stringify(etagOf(stored))}${modRevision},"liveness":${stored.liveness ?? NOT_PROBED_JSON}}`
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
 * A page as JSON, from the stored bytes: `{"total":<n>,"data":[<each>,...],"revision":"<r>"}`,
 * and `"nextPageToken"` when there is a next page. The same text REST and the
 * RPCs' JSON codecs answer (their members in the order of their field numbers, as protobuf-es writes them).
 * `revision` (an int64, so a string) is there when the page was read (lists), even when 0, so a client
 * always has a revision to watch from; a status change's page has none.
 */
export function pageJson(
  total: number,
  data: readonly StoredDefinition[],
  nextPageToken?: string,
  revision?: number,
): Uint8Array<ArrayBuffer> {
  const chunks: Uint8Array[] = [encoder.encode(`{"total":${total},"data":[`)];
  data.forEach((stored, i) => {
    if (i > 0) chunks.push(COMMA);
    chunks.push(...jsonChunksWithMeta(stored));
  });
  // A token is base64url: nothing in it needs escaping in JSON.
  const read = revision === undefined ? "" : `,"revision":"${revision}"`;
  chunks.push(
    nextPageToken === undefined && read === ""
      ? DATA_END
      : encoder.encode(`]${nextPageToken === undefined ? "" : `,"nextPageToken":"${nextPageToken}"`}${read}}`),
  );
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
  // Made when first read.
  let meta: RegistryMeta | undefined;
  Object.defineProperty(message, "meta", {
    enumerable: true,
    configurable: true,
    get: () => (meta ??= metaMessage(stored)),
    set: (value: RegistryMeta | undefined) => {
      meta = value;
    },
  });
  return message;
}

const META = RegistryMetaSchema.field;

/**
 * `meta` in protobuf binary, written out here field by field (no message built, no reflection, no growing
 * writer): the same bytes protobuf-es writes for metaMessage (test/surfaces/definition-meta.test.ts holds it
 * to that).
 */
export function metaBinary(stored: StoredDefinition): Uint8Array {
  return metaInto(stored, 0).subarray(0);
}

/**
 * `meta`'s bytes after `headroom` bytes left free, in a buffer with room for `more` bytes after them; returns
 * the buffer cut to headroom + meta (its `byteLength`), the room after it still in its ArrayBuffer. Written
 * with no closure, string or view made per field: the instants' digits straight from the Date (writeInstant),
 * ASCII text byte by byte, other text through encodeInto (MetaWriter).
 */
function metaInto(stored: StoredDefinition, headroom: number, more = 0): Uint8Array {
  const message = stored.statusMessage;
  const etag = etagOf(stored);
  const liveness = livenessBinary(stored);
  // Tags and lengths take at most 1 + 5 bytes each; the instants are 24 ASCII bytes; UTF-8 at most 3 a unit;
  // an int64 varint at most 10.
  const most = 10 * 6 + 3 * 24 + 10 + 10 + 5 + 2 + 3 * (etag.length + (message?.length ?? 0)) + liveness.length;
  const w = new MetaWriter(new Uint8Array(headroom + most + more), headroom);
  w.instant(META.createdAt.number, stored.createdAt);
  w.instant(META.updatedAt.number, stored.updatedAt);
  w.instant(META.statusChangedAt.number, stored.statusChangedAt);
  if (stored.revision !== 0) {
    w.varint((META.revision.number << 3) | WireType.Varint);
    w.varint(stored.revision);
  }
  // A stored status is never UNSPECIFIED (0, which protobuf-es would leave out).
  w.varint((META.status.number << 3) | WireType.Varint);
  w.varint(DefinitionStatus[stored.status]);
  // Both optional: present when set, even empty or false.
  if (message !== null) w.text(META.statusMessage.number, message, true);
  w.varint((META.latest.number << 3) | WireType.Varint);
  w.out[w.at++] = stored.latest ? 1 : 0;
  w.text(META.etag.number, etag);
  if (stored.modRevision !== 0) {
    w.varint((META.modRevision.number << 3) | WireType.Varint);
    // Up to 2^53: past 32 bits, by division (varint's shifts are 32-bit).
    let rest = stored.modRevision;
    while (rest > 0x7f) {
      w.out[w.at++] = (rest % 0x80) | 0x80;
      rest = Math.floor(rest / 0x80);
    }
    w.out[w.at++] = rest;
  }
  w.varint((META.liveness.number << 3) | WireType.LengthDelimited);
  w.varint(liveness.length);
  w.out.set(liveness, w.at);
  w.at += liveness.length;
  return w.out.subarray(0, w.at);
}

/** Protobuf fields written into a buffer sized for them beforehand (metaInto). */
class MetaWriter {
  constructor(
    readonly out: Uint8Array,
    public at: number,
  ) {}

  /** An unsigned varint below 2^32. */
  varint(value: number): void {
    let rest = value >>> 0;
    while (rest > 0x7f) {
      this.out[this.at++] = (rest & 0x7f) | 0x80;
      rest >>>= 7;
    }
    this.out[this.at++] = rest;
  }

  /** A string field (left out when empty unless `always`). */
  text(no: number, value: string, always = false): void {
    if (value === "" && !always) return;
    this.varint((no << 3) | WireType.LengthDelimited);
    const { out } = this;
    // ASCII below 128 bytes (an etag, most messages): its length is its own, one byte, and its bytes its codes.
    if (value.length < 0x80) {
      const start = this.at + 1;
      let i = 0;
      for (; i < value.length; i++) {
        const code = value.charCodeAt(i);
        if (code >= 0x80) break;
        out[start + i] = code;
      }
      if (i === value.length) {
        out[this.at] = value.length;
        this.at = start + value.length;
        return;
      }
    }
    // Anything else: its UTF-8 written after room for a length of up to 5 bytes, then moved down to it.
    const lengthAt = this.at;
    const { written } = utf8.encodeInto(value, out.subarray(lengthAt + 5));
    this.at = lengthAt;
    this.varint(written);
    out.copyWithin(this.at, lengthAt + 5, lengthAt + 5 + written);
    this.at += written;
  }

  /** An instant field, as RFC 3339 text (instant()). */
  instant(no: number, date: Date): void {
    const year = date.getUTCFullYear();
    // toISOString's extended years (before 0, after 9999) are not 24 bytes: written as text.
    if (year < 0 || year > 9999 || Number.isNaN(year)) {
      this.text(no, instant(date));
      return;
    }
    this.varint((no << 3) | WireType.LengthDelimited);
    this.out[this.at++] = 24;
    this.at = writeInstant(this.out, this.at, date, year);
  }
}

/** `n` as `width` ASCII digits at `at` in `out`; returns the position after them. */
function digits(out: Uint8Array, at: number, n: number, width: number): number {
  for (let i = width - 1; i >= 0; i--) {
    out[at + i] = 0x30 + (n % 10);
    n = Math.floor(n / 10);
  }
  return at + width;
}

/** `date` (its year 0-9999) as toISOString writes it, `YYYY-MM-DDTHH:MM:SS.mmmZ`, at `at`; returns the end. */
function writeInstant(out: Uint8Array, at: number, date: Date, year: number): number {
  at = digits(out, at, year, 4);
  out[at++] = 0x2d; // -
  at = digits(out, at, date.getUTCMonth() + 1, 2);
  out[at++] = 0x2d;
  at = digits(out, at, date.getUTCDate(), 2);
  out[at++] = 0x54; // T
  at = digits(out, at, date.getUTCHours(), 2);
  out[at++] = 0x3a; // :
  at = digits(out, at, date.getUTCMinutes(), 2);
  out[at++] = 0x3a;
  at = digits(out, at, date.getUTCSeconds(), 2);
  out[at++] = 0x2e; // .
  at = digits(out, at, date.getUTCMilliseconds(), 3);
  out[at++] = 0x5a; // Z
  return at;
}

const utf8 = new TextEncoder();

/**
 * The binary encoding of `stored` as an answer, after `headroom` bytes left for the caller (a gRPC envelope's
 * prefix): its `meta`, then the stored bytes as they are, written once into one buffer (toBinary of the message
 * definitionWithMeta makes would copy the stored fields one by one through its writer, growing it as it goes).
 * What the gRPC and Connect surfaces write for a definition (rpc-result.ts, grpc/unary.ts).
 */
export function storedDefinitionBinary(stored: StoredDefinition, headroom = 0): Uint8Array {
  const binary = stored.binary;
  // meta's tag and length (room for PREFIX_ROOM bytes), then meta, then the stored bytes.
  const meta = metaInto(stored, headroom + PREFIX_ROOM, binary.byteLength);
  const metaLength = meta.byteLength - headroom - PREFIX_ROOM;
  const prefix = [...varint(META_TAG), ...varint(metaLength)];
  const start = headroom + PREFIX_ROOM - prefix.length;
  const out = new Uint8Array(meta.buffer, 0, meta.byteLength + binary.byteLength);
  out.set(prefix, start);
  out.set(binary, meta.byteLength);
  if (start === headroom) return out;
  // The prefix took fewer bytes than the room left for it: the headroom moves up to meet it.
  return out.subarray(start - headroom);
}

/** Room for meta's tag (up to 3 bytes: field numbers below 2^18) and length (up to 2: meta is below 16 KiB). */
const PREFIX_ROOM = 5;

/** `meta`'s tag: its field number, wire type 2 (length-delimited). */
const META_TAG = (AgentDefinitionSchema.field.meta.number << 3) | 2;

/** An unsigned varint's bytes (for values below 2^31: a tag, a length). */
function varint(value: number): number[] {
  const bytes: number[] = [];
  let rest = value;
  while (rest > 0x7f) {
    bytes.push((rest & 0x7f) | 0x80);
    rest >>>= 7;
  }
  bytes.push(rest);
  return bytes;
}
