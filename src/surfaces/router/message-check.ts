/**
 * The router's check of a registry RPC's message (gRPC-Web, Connect GET, gRPC's JSON codec), done before
 * Connect decodes it, as the pipeline's check does for the RPCs the edge serves itself
 * (pipeline/message-check.ts): the same problems, the same words. The parsed JSON value is handed to Connect,
 * which only converts it: the text is parsed once. A binary message is the one place a body is decoded twice
 * (here, then by Connect, which has no hook for its decoding errors). A compressed message is inflated here and
 * handed on plain, its encoding header removed.
 *
 * A refused message is replaced by an empty one and the problem travels in the edge's verdict, raised inside
 * the RPC, so Connect encodes the error for the request's own protocol.
 */
import type { DescMethod, JsonValue } from "@bufbuild/protobuf";
import { base64Encode } from "@bufbuild/protobuf/wire";
import type { Compression, UniversalServerRequest } from "@connectrpc/connect/protocol";
import { type RegistryError, tooLarge } from "../../domain/errors.js";
import { concatBytes } from "../encoding/bytes.js";
import {
  encoder,
  envelope,
  failedRead,
  failing,
  formatOf,
  fromBase64Url,
  MessageDecoder,
  once,
  unenvelope,
} from "../pipeline/message-decoder.js";

/** What Connect is handed: the request (its body, or its URL for a GET) and the problem to raise, if any. */
export interface CheckedRequest {
  readonly request: UniversalServerRequest;
  readonly problem: RegistryError | undefined;
}

/** The router's check of one method's messages. */
export interface RouterCheck {
  /** Reads and checks the message of `req`. */
  check(req: UniversalServerRequest): Promise<CheckedRequest>;
  /** `req` with its message replaced by an empty one, unread: for a caller refused before its body is read. */
  withoutMessage(req: UniversalServerRequest): UniversalServerRequest;
}

/** `req` with its message replaced by `data`, plain (no encoding). */
function withPlainBody(
  req: UniversalServerRequest,
  data: Uint8Array,
  enveloped: boolean,
  value?: JsonValue,
): UniversalServerRequest {
  const header = new Headers(req.header);
  header.delete("content-length");
  header.delete("content-encoding");
  header.delete("grpc-encoding");
  return { ...req, header, body: value !== undefined ? value : once(enveloped ? envelope(data) : data) };
}

/** `req` with an empty message in its body. */
function emptyBody(req: UniversalServerRequest): UniversalServerRequest {
  const format = formatOf(req.header.get("content-type") ?? "");
  return withPlainBody(req, encoder.encode(format?.binary ? "" : "{}"), format?.enveloped === true);
}

/** A Connect GET with an empty message in its query. */
function emptyQuery(req: UniversalServerRequest): UniversalServerRequest {
  const url = new URL(req.url);
  url.searchParams.set("message", url.searchParams.get("encoding") === "proto" ? "" : "{}");
  url.searchParams.delete("base64");
  url.searchParams.delete("compression");
  return { ...req, url: url.toString() };
}

/**
 * The whole body, read within the limit (nothing past it is read), or the problem with it (too large, refused
 * by the body budget), or the failure of a client gone mid-body.
 */
async function readMessageBody(
  body: AsyncIterable<Uint8Array>,
  contentLength: string | null | undefined,
  enveloped: boolean,
  maxBodyBytes: number,
): Promise<
  | { bytes: Uint8Array; problem?: undefined; failure?: undefined }
  | { bytes?: undefined; problem: RegistryError; failure?: undefined }
  | { bytes?: undefined; problem?: undefined; failure: unknown }
> {
  const limit = maxBodyBytes + (enveloped ? 5 : 0);
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
}

/** Connect's GET requests carry the message in the query. */
async function checkQuery(decoder: MessageDecoder, req: UniversalServerRequest): Promise<CheckedRequest> {
  const url = new URL(req.url);
  const message = url.searchParams.get("message");
  const compression = decoder.compressionOf(url.searchParams.get("compression"));
  if (message === null || compression === undefined) return { request: req, problem: undefined };
  const binary = url.searchParams.get("encoding") === "proto";
  let data = url.searchParams.get("base64") === "1" ? fromBase64Url(message) : encoder.encode(message);
  if (compression !== null) {
    const inflated = await decoder.decompress(compression, data);
    if (inflated.problem !== undefined) return { request: emptyQuery(req), problem: inflated.problem };
    data = inflated.data;
  }
  const problem = binary ? decoder.decodeBinary(data).problem : decoder.checkJson(data).problem;
  if (problem !== undefined) return { request: emptyQuery(req), problem };
  if (compression === null) return { request: req, problem };
  // Connect is handed the inflated message: it is not decompressed twice.
  // base64url without padding, as Connect GET's `base64=1` takes it
  url.searchParams.set("message", base64Encode(data, "url"));
  url.searchParams.set("base64", "1");
  url.searchParams.delete("compression");
  return { request: { ...req, url: url.toString() }, problem };
}

/** A POST's message: read, inflated, checked; handed on as Connect takes it. */
async function checkBody(decoder: MessageDecoder, req: UniversalServerRequest): Promise<CheckedRequest> {
  const format = formatOf(req.header.get("content-type") ?? "");
  const compression = decoder.compressionOf(req.header.get(format?.enveloped ? "grpc-encoding" : "content-encoding"));
  const body = req.body;
  if (format === undefined || compression === undefined) return { request: req, problem: undefined };
  if (typeof body !== "object" || body === null || !(Symbol.asyncIterator in body))
    return { request: req, problem: undefined };
  const length = req.header.get("content-length");
  const read = await readMessageBody(body as AsyncIterable<Uint8Array>, length, format.enveloped, decoder.maxBodyBytes);
  if (read.problem !== undefined) return { request: emptyBody(req), problem: read.problem };
  // The client went away mid-body: Connect meets the same failure where it would have.
  if (read.bytes === undefined) return { request: { ...req, body: failing(read.failure) }, problem: undefined };
  const bytes = read.bytes;
  const frame = format.enveloped ? unenvelope(bytes) : { data: bytes, compressed: compression !== null };
  if (frame === undefined) return { request: { ...req, body: once(bytes) }, problem: undefined };
  const inflated = await decoder.inflate(frame, compression);
  if (inflated.problem !== undefined) return { request: emptyBody(req), problem: inflated.problem };
  const data = inflated.data;
  // An inflated message goes on plain, its encoding header removed: Connect does not inflate it again.
  const plain = frame.compressed;
  if (format.binary) {
    const problem = decoder.decodeBinary(data).problem;
    if (problem !== undefined) return { request: emptyBody(req), problem };
    return { request: plain ? withPlainBody(req, data, format.enveloped) : { ...req, body: once(bytes) }, problem };
  }
  const json = decoder.checkJson(data);
  if (json.problem !== undefined) return { request: emptyBody(req), problem: json.problem };
  // Connect's own unary JSON takes the parsed value; gRPC's enveloped JSON only bytes.
  if (!format.enveloped)
    return {
      request: plain ? withPlainBody(req, data, false, json.value) : { ...req, body: json.value },
      problem: undefined,
    };
  return { request: plain ? withPlainBody(req, data, true) : { ...req, body: once(bytes) }, problem: undefined };
}

/** The router's checks of `method`'s messages. */
export function createRouterCheck(
  method: DescMethod,
  maxBodyBytes: number,
  compressions: readonly Compression[] = [],
): RouterCheck {
  const decoder = new MessageDecoder(method, maxBodyBytes, compressions);
  return {
    withoutMessage: (req) => (req.method === "GET" ? emptyQuery(req) : emptyBody(req)),
    check: (req) => (req.method === "GET" ? checkQuery(decoder, req) : checkBody(decoder, req)),
  };
}
