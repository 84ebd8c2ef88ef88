/**
 * The edge's check of a unary RPC message (gRPC, gRPC-Web, Connect; JSON and
 * binary), done before Connect decodes it, so a malformed message is a 400 /
 * INVALID_ARGUMENT with the registry's error detail:
 *
 * - JSON: invalid UTF-8, a member given twice (JSON.parse keeps the last),
 *   nesting beyond MAX_JSON_DEPTH, unknown members and wrong types (each with
 *   its path), as REST reports them; proto names are accepted too. The parsed
 *   value is handed to Connect, which only converts it: the text is parsed once.
 * - binary: a message protobuf-es cannot decode (broken wire format, invalid
 *   UTF-8 in a string), which Connect itself would answer as INTERNAL. This
 *   is the one place a body is decoded twice (here, then by Connect, which has
 *   no hook for its decoding errors); see BENCHMARKS.md for its cost.
 * - a body over the limit: PAYLOAD_TOO_LARGE, without reading past it.
 *
 * - a compressed message (an encoding the router accepts): decompressed here,
 *   within the same limit (a zip bomb is PAYLOAD_TOO_LARGE once it inflates
 *   past it, never inflated further), then checked as above; one that cannot
 *   be decompressed is MALFORMED_COMPRESSION. Connect is handed the plain
 *   message, its encoding header removed.
 *
 * A refused message is replaced by an empty one and the problem travels in the
 * edge's verdict, raised inside the RPC, so Connect encodes the error for the
 * request's own protocol.
 */
import { type DescMethod, fromBinary, fromJson, type JsonValue, type Message } from "@bufbuild/protobuf";
import { base64Encode } from "@bufbuild/protobuf/wire";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Compression, UniversalServerRequest } from "@connectrpc/connect/protocol";
import { bodyFieldOf } from "../../domain/body-field.js";
import { type Issue, invalid, RegistryError, tooLarge } from "../../domain/errors.js";
import type { Operations } from "../../operations/operation.js";
import { type BodyCheck, checkJsonBody } from "../encoding/body-check.js";
import { concatBytes } from "../encoding/bytes.js";
import type { RpcMessage } from "./pipeline.js";

/** The request message's encoding, from its content type; undefined for anything the check leaves alone. */
function formatOf(contentType: string): { binary: boolean; enveloped: boolean } | undefined {
  const type = (contentType.split(";")[0] ?? "").trim().toLowerCase();
  switch (type) {
    case "application/json":
      return { binary: false, enveloped: false };
    case "application/proto":
      return { binary: true, enveloped: false };
    case "application/grpc":
    case "application/grpc+proto":
    case "application/grpc-web":
    case "application/grpc-web+proto":
      return { binary: true, enveloped: true };
    case "application/grpc+json":
    case "application/grpc-web+json":
      return { binary: false, enveloped: true };
    default:
      return undefined;
  }
}

const encoder = new TextEncoder();

function envelope(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + data.byteLength);
  new DataView(out.buffer).setUint32(1, data.byteLength);
  out.set(data, 5);
  return out;
}

/**
 * The data of the one envelope of a unary request, and whether it is compressed; undefined for anything else
 * (Connect then decides).
 */
function unenvelope(bytes: Uint8Array): { data: Uint8Array; compressed: boolean } | undefined {
  if (bytes.byteLength < 5 || (bytes[0] !== 0 && bytes[0] !== 1)) return undefined;
  const length = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(1);
  return bytes.byteLength === 5 + length ? { data: bytes.subarray(5), compressed: bytes[0] === 1 } : undefined;
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

// biome-ignore lint/correctness/useYield: an iterable that fails when read
async function* failing(err: unknown): AsyncIterable<Uint8Array> {
  throw err;
}

/** What Connect is handed: the request (its body, or its URL for a GET) and the problem to raise, if any. */
export interface CheckedRequest {
  readonly request: UniversalServerRequest;
  readonly problem: RegistryError | undefined;
}

/** The checks of one method's messages. */
export interface MessageCheck {
  /** Reads and checks the message of `req`. */
  check(req: UniversalServerRequest): Promise<CheckedRequest>;
  /** `req` with its message replaced by an empty one, unread: for a caller refused before its body is read. */
  withoutMessage(req: UniversalServerRequest): UniversalServerRequest;
  /**
   * The message of a binary gRPC request the edge serves itself (grpc/unary.ts, grpc/stream.ts): read within
   * the limit, inflated with `compression` (the request's `grpc-encoding`; null: none), decoded once. Or the
   * problem with it, or (`failure`) a broken envelope or a client gone mid-body, as Connect would raise them.
   */
  grpcMessage(read: BodyRead, contentLength: string | undefined, compression: Compression | null): Promise<RpcMessage>;
  /**
   * The message of a Connect unary POST the edge serves itself (connect/unary.ts): read within the limit,
   * inflated with `compression` (its `content-encoding`), checked and decoded once (`binary`: protobuf, else
   * JSON through the one body check). Or the problem with it, or the failure Connect would raise.
   */
  connectMessage(
    read: BodyRead,
    contentLength: string | undefined,
    compression: Compression | null,
    binary: boolean,
  ): Promise<RpcMessage>;
}

/**
 * A body read that failed: the body budget's refusal (OVERLOADED) is a problem answered like any other refused
 * message; anything else (a client gone mid-body) a failure.
 */
function failedRead(
  err: unknown,
): { problem: RegistryError; failure?: undefined } | { problem?: undefined; failure: unknown } {
  const refused =
    err instanceof RegistryError
      ? err
      : err instanceof ConnectError && err.cause instanceof RegistryError
        ? err.cause
        : undefined;
  return refused !== undefined ? { problem: refused } : { failure: err };
}

/** Reads a whole body of at most `limit` bytes; undefined when it is longer (the rest is left unread). */
export type BodyRead = (limit: number) => Promise<Uint8Array | undefined>;

/**
 * The one message of a unary gRPC request's bytes, or the protocol error Connect raises for them (the same codes
 * and words, so either path answers alike).
 */
function oneEnvelope(bytes: Uint8Array): { data: Uint8Array; compressed: boolean } | { failure: ConnectError } {
  if (bytes.byteLength === 0)
    return { failure: new ConnectError("protocol error: missing input message for unary method", Code.Unimplemented) };
  const frame = unenvelope(bytes);
  if (frame !== undefined) return frame;
  if (bytes.byteLength >= 5 && (bytes[0] === 0 || bytes[0] === 1)) {
    const length = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(1);
    if (bytes.byteLength > 5 + length)
      return {
        failure: new ConnectError("protocol error: received extra input message for unary method", Code.Unimplemented),
      };
  }
  return { failure: new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument) };
}

/** The checks of `method`'s messages: the JSON ones are the one body check (body-check.ts). */
export function createMessageCheck(
  method: DescMethod,
  maxBodyBytes: number,
  compressions: readonly Compression[] = [],
): MessageCheck {
  /** A problem with the message as a whole (its compression, its binary encoding). */
  const refuse = (code: Issue["code"], message: string): RegistryError => invalid([{ code, message }], message);
  // The RPC's message is the whole request: issues inside its body field are given relative to it, as REST gives them.
  const bodyField = bodyFieldOf(method);
  const checkJson = (data: Uint8Array): BodyCheck =>
    checkJsonBody(data, method.input, { bodyField, sentAs: bodyField, protoNames: true });

  /** The message inflated within the body limit, or the problem with it. */
  const decompress = async (
    compression: Compression,
    data: Uint8Array,
  ): Promise<{ data: Uint8Array; problem?: undefined } | { data?: undefined; problem: RegistryError }> => {
    try {
      return { data: await compression.decompress(data, maxBodyBytes) };
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.ResourceExhausted)
        return { problem: tooLarge(maxBodyBytes) };
      const message =
        `The message cannot be decompressed as ${compression.name}: it is not valid ` + `${compression.name} data.`;
      return { problem: refuse("MALFORMED_COMPRESSION", message) };
    }
  };

  /** A frame's message, inflated when it is marked compressed, or the problem with it. */
  const inflate = async (
    frame: { data: Uint8Array; compressed: boolean },
    compression: Compression | null,
  ): Promise<{ data: Uint8Array; problem?: undefined } | { data?: undefined; problem: RegistryError }> => {
    if (!frame.compressed) return { data: frame.data };
    if (compression === null) {
      const message = "The message is marked compressed, but the request names no grpc-encoding to decompress it with.";
      return { problem: refuse("MALFORMED_COMPRESSION", message) };
    }
    return decompress(compression, frame.data);
  };

  /**
   * The compression a request names, null for none, undefined for one the router does not accept (Connect
   * answers that).
   */
  const compressionOf = (name: string | null): Compression | null | undefined => {
    if (name === null || name === "identity") return null;
    return compressions.find((c) => c.name === name);
  };

  /** The request with its message replaced by `data`, plain (no encoding). */
  const withPlainBody = (
    req: UniversalServerRequest,
    data: Uint8Array,
    enveloped: boolean,
    value?: JsonValue,
  ): UniversalServerRequest => {
    const header = new Headers(req.header);
    header.delete("content-length");
    header.delete("content-encoding");
    header.delete("grpc-encoding");
    return { ...req, header, body: value !== undefined ? value : once(enveloped ? envelope(data) : data) };
  };

  /**
   * The whole body, read within the limit (nothing past it is read), or the problem with it (too large, refused
   * by the body budget), or the failure of a client gone mid-body.
   */
  const readMessageBody = async (
    body: AsyncIterable<Uint8Array>,
    contentLength: string | null | undefined,
    format: { enveloped: boolean },
  ): Promise<
    | { bytes: Uint8Array; problem?: undefined; failure?: undefined }
    | { bytes?: undefined; problem: RegistryError; failure?: undefined }
    | { bytes?: undefined; problem?: undefined; failure: unknown }
  > => {
    const limit = maxBodyBytes + (format.enveloped ? 5 : 0);
    if (Number(contentLength ?? 0) > limit) return { problem: tooLarge(maxBodyBytes) };
    const chunks: Uint8Array[] = [];
    let size = 0;
    try {
      for await (const chunk of body) {
        size += chunk.byteLength;
        // Past the limit nothing more is read: the answer is sent and the rest of the body dropped.
        if (size > limit) return { problem: tooLarge(maxBodyBytes) };
        chunks.push(chunk);
      }
    } catch (err) {
      return failedRead(err);
    }
    return { bytes: concatBytes(chunks, size) };
  };

  /**
   * A whole body of at most `limit` bytes, read by `read`; else the problem (too large, refused by the body
   * budget) or the failure (a client gone mid-body).
   */
  const readWhole = async (
    read: BodyRead,
    contentLength: string | undefined,
    limit: number,
  ): Promise<{ bytes: Uint8Array } | (RpcMessage & { bytes?: undefined })> => {
    if (Number(contentLength ?? 0) > limit) return { problem: tooLarge(maxBodyBytes) };
    let bytes: Uint8Array | undefined;
    try {
      bytes = await read(limit);
    } catch (err) {
      return failedRead(err);
    }
    return bytes === undefined ? { problem: tooLarge(maxBodyBytes) } : { bytes };
  };

  /** The binary message decoded, or the problem with it. */
  const decodeBinary = (data: Uint8Array): { message: Message; problem?: undefined } | { problem: RegistryError } => {
    try {
      return { message: fromBinary(method.input, data) };
    } catch (err) {
      const message = `The protobuf message cannot be decoded: ${err instanceof Error ? err.message : String(err)}.`;
      return { problem: refuse("MALFORMED_PROTOBUF", message) };
    }
  };
  const checkBinary = (data: Uint8Array): RegistryError | undefined => decodeBinary(data).problem;

  const emptyBody = (req: UniversalServerRequest): UniversalServerRequest => {
    const format = formatOf(req.header.get("content-type") ?? "");
    return withPlainBody(req, encoder.encode(format?.binary ? "" : "{}"), format?.enveloped === true);
  };

  /** Connect's GET requests carry the message in the query. */
  const checkQuery = async (req: UniversalServerRequest): Promise<CheckedRequest> => {
    const url = new URL(req.url);
    const message = url.searchParams.get("message");
    const compression = compressionOf(url.searchParams.get("compression"));
    if (message === null || compression === undefined) return { request: req, problem: undefined };
    const binary = url.searchParams.get("encoding") === "proto";
    let data = url.searchParams.get("base64") === "1" ? fromBase64Url(message) : encoder.encode(message);
    if (compression !== null) {
      const inflated = await decompress(compression, data);
      if (inflated.problem !== undefined) return { request: emptyQuery(req), problem: inflated.problem };
      data = inflated.data;
    }
    const problem = binary ? checkBinary(data) : checkJson(data).problem;
    if (problem !== undefined) return { request: emptyQuery(req), problem };
    if (compression === null) return { request: req, problem };
    // Connect is handed the inflated message: it is not decompressed twice.
    // base64url without padding, as Connect GET's `base64=1` takes it
    url.searchParams.set("message", base64Encode(data, "url"));
    url.searchParams.set("base64", "1");
    url.searchParams.delete("compression");
    return { request: { ...req, url: url.toString() }, problem };
  };

  const emptyQuery = (req: UniversalServerRequest): UniversalServerRequest => {
    const url = new URL(req.url);
    url.searchParams.set("message", url.searchParams.get("encoding") === "proto" ? "" : "{}");
    url.searchParams.delete("base64");
    url.searchParams.delete("compression");
    return { ...req, url: url.toString() };
  };

  return {
    async grpcMessage(read, contentLength, compression) {
      const whole = await readWhole(read, contentLength, maxBodyBytes + 5);
      if (whole.bytes === undefined) return whole;
      const frame = oneEnvelope(whole.bytes);
      if ("failure" in frame) return frame;
      const inflated = await inflate(frame, compression);
      return inflated.problem !== undefined ? inflated : decodeBinary(inflated.data);
    },

    async connectMessage(read, contentLength, compression, binary) {
      const whole = await readWhole(read, contentLength, maxBodyBytes);
      if (whole.bytes === undefined) return whole;
      const inflated = await inflate({ data: whole.bytes, compressed: compression !== null }, compression);
      if (inflated.problem !== undefined) return inflated;
      if (binary) return decodeBinary(inflated.data);
      const json = checkJson(inflated.data);
      if (json.problem !== undefined) return { problem: json.problem };
      try {
        return { message: fromJson(method.input, json.value as JsonValue, { ignoreUnknownFields: false }) };
      } catch (err) {
        // What the check lets through, protobuf-es converts; should it not, Connect's own words for it.
        return { failure: ConnectError.from(err, Code.InvalidArgument) };
      }
    },

    withoutMessage: (req) => (req.method === "GET" ? emptyQuery(req) : emptyBody(req)),

    async check(req) {
      if (req.method === "GET") return checkQuery(req);
      const format = formatOf(req.header.get("content-type") ?? "");
      const compression = compressionOf(req.header.get(format?.enveloped ? "grpc-encoding" : "content-encoding"));
      const body = req.body;
      if (format === undefined || compression === undefined) return { request: req, problem: undefined };
      if (typeof body !== "object" || body === null || !(Symbol.asyncIterator in body))
        return { request: req, problem: undefined };
      const read = await readMessageBody(body as AsyncIterable<Uint8Array>, req.header.get("content-length"), format);
      if (read.problem !== undefined) return { request: emptyBody(req), problem: read.problem };
      // The client went away mid-body: Connect meets the same failure where it would have.
      if (read.bytes === undefined) return { request: { ...req, body: failing(read.failure) }, problem: undefined };
      const bytes = read.bytes;
      const frame = format.enveloped ? unenvelope(bytes) : { data: bytes, compressed: compression !== null };
      if (frame === undefined) return { request: { ...req, body: once(bytes) }, problem: undefined };
      const inflated = await inflate(frame, compression);
      if (inflated.problem !== undefined) return { request: emptyBody(req), problem: inflated.problem };
      const data = inflated.data;
      // An inflated message goes on plain, its encoding header removed: Connect does not inflate it again.
      const plain = frame.compressed;
      if (format.binary) {
        const problem = checkBinary(data);
        if (problem !== undefined) return { request: emptyBody(req), problem };
        return { request: plain ? withPlainBody(req, data, format.enveloped) : { ...req, body: once(bytes) }, problem };
      }
      const json = checkJson(data);
      if (json.problem !== undefined) return { request: emptyBody(req), problem: json.problem };
      // Connect's own unary JSON takes the parsed value; gRPC's enveloped JSON only bytes.
      if (!format.enveloped)
        return {
          request: plain ? withPlainBody(req, data, false, json.value) : { ...req, body: json.value },
          problem: undefined,
        };
      return { request: plain ? withPlainBody(req, data, true) : { ...req, body: once(bytes) }, problem: undefined };
    },
  };
}

/**
 * Base64url (or standard base64), padded or not; what cannot be decoded is taken as one bad byte, which fails
 * the check.
 */
function fromBase64Url(text: string): Uint8Array {
  try {
    const binary = atob(
      text
        .replace(/-/g, "+")
        .replace(/_/g, "/")
        .replace(/=+$/, "")
        .padEnd(Math.ceil(text.length / 4) * 4, "="),
    );
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  } catch {
    return new Uint8Array([0xff]);
  }
}

/** The message check of an operation's method (made once for each, at start). */
export type MessageChecks = (method: DescMethod) => MessageCheck;

/**
 * The message check of every operation's RPC. Compressed messages are inflated by the check with the router's
 * own compressions, so they pass the same guard.
 */
export function createMessageChecks(
  operations: Operations,
  maxBodyBytes: number,
  compressions: readonly Compression[],
): MessageChecks {
  const checks = new Map(
    [...operations.keys()].map((method) => [method, createMessageCheck(method, maxBodyBytes, compressions)]),
  );
  return (method) => {
    const check = checks.get(method);
    if (check === undefined) throw new Error(`${method.name} has no operation, so no message check.`);
    return check;
  };
}
