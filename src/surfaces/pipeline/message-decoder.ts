/**
 * What the message checks share (message-check.ts for the RPCs the edge serves itself, router/message-check.ts
 * for Connect's router): one method's message read within the body limit, inflated with the router's own
 * compressions (a zip bomb is PAYLOAD_TOO_LARGE once it inflates past the limit, never inflated further),
 * checked as JSON by the one body check or decoded as protobuf, each problem the registry's error.
 */
import { type DescMethod, fromBinary, type Message } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Compression } from "@connectrpc/connect/protocol";
import { bodyFieldOf } from "../../domain/body-field.js";
import { type Issue, invalid, RegistryError, tooLarge } from "../../domain/errors.js";
import { type BodyCheck, checkJsonBody } from "../encoding/body-check.js";
import type { RpcMessage } from "./pipeline.js";

/** The request message's encoding, from its content type; undefined for anything the check leaves alone. */
export function formatOf(contentType: string): { binary: boolean; enveloped: boolean } | undefined {
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

export const encoder = new TextEncoder();

export function envelope(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + data.byteLength);
  new DataView(out.buffer).setUint32(1, data.byteLength);
  out.set(data, 5);
  return out;
}

/**
 * The data of the one envelope of a unary request, and whether it is compressed; undefined for anything else
 * (Connect then decides).
 */
export function unenvelope(bytes: Uint8Array): { data: Uint8Array; compressed: boolean } | undefined {
  if (bytes.byteLength < 5 || (bytes[0] !== 0 && bytes[0] !== 1)) return undefined;
  const length = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(1);
  return bytes.byteLength === 5 + length ? { data: bytes.subarray(5), compressed: bytes[0] === 1 } : undefined;
}

export async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

// biome-ignore lint/correctness/useYield: an iterable that fails when read
export async function* failing(err: unknown): AsyncIterable<Uint8Array> {
  throw err;
}

/**
 * A body read that failed: the body budget's refusal (OVERLOADED) is a problem answered like any other refused
 * message; anything else (a client gone mid-body) a failure.
 */
export function failedRead(
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
export function oneEnvelope(bytes: Uint8Array): { data: Uint8Array; compressed: boolean } | { failure: ConnectError } {
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

/**
 * Base64url (or standard base64), padded or not; what cannot be decoded is taken as one bad byte, which fails
 * the check.
 */
export function fromBase64Url(text: string): Uint8Array {
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

/** A whole body, or the problem with it (too large, refused by the body budget), or a client gone mid-body. */
export type WholeBody = { bytes: Uint8Array } | (RpcMessage & { bytes?: undefined });

/** An inflated message, or the problem with it. */
export type Inflated = { data: Uint8Array; problem?: undefined } | { data?: undefined; problem: RegistryError };

/** The shared steps of reading and checking one method's message. */
export class MessageDecoder {
  readonly #bodyField: string | undefined;
  constructor(
    readonly method: DescMethod,
    readonly maxBodyBytes: number,
    readonly compressions: readonly Compression[],
  ) {
    // The RPC's message is the whole request: issues inside its body field are given relative to it, as REST
    // gives them.
    this.#bodyField = bodyFieldOf(method);
  }

  /** A problem with the message as a whole (its compression, its binary encoding). */
  refuse(code: Issue["code"], message: string): RegistryError {
    return invalid([{ code, message }], message);
  }

  checkJson(data: Uint8Array): BodyCheck {
    return checkJsonBody(data, this.method.input, {
      bodyField: this.#bodyField,
      sentAs: this.#bodyField,
      protoNames: true,
    });
  }

  /** The message inflated within the body limit, or the problem with it. */
  async decompress(compression: Compression, data: Uint8Array): Promise<Inflated> {
    try {
      return { data: await compression.decompress(data, this.maxBodyBytes) };
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.ResourceExhausted)
        return { problem: tooLarge(this.maxBodyBytes) };
      const message =
        `The message cannot be decompressed as ${compression.name}: it is not valid ` + `${compression.name} data.`;
      return { problem: this.refuse("MALFORMED_COMPRESSION", message) };
    }
  }

  /** A frame's message, inflated when it is marked compressed, or the problem with it. */
  async inflate(frame: { data: Uint8Array; compressed: boolean }, compression: Compression | null): Promise<Inflated> {
    if (!frame.compressed) return { data: frame.data };
    if (compression === null) {
      const message = "The message is marked compressed, but the request names no grpc-encoding to decompress it with.";
      return { problem: this.refuse("MALFORMED_COMPRESSION", message) };
    }
    return this.decompress(compression, frame.data);
  }

  /**
   * The compression a request names, null for none, undefined for one the router does not accept (Connect
   * answers that).
   */
  compressionOf(name: string | null): Compression | null | undefined {
    if (name === null || name === "identity") return null;
    return this.compressions.find((c) => c.name === name);
  }

  /**
   * A whole body of at most `limit` bytes, read by `read`; else the problem (too large, refused by the body
   * budget) or the failure (a client gone mid-body).
   */
  async readWhole(read: BodyRead, contentLength: string | undefined, limit: number): Promise<WholeBody> {
    if (Number(contentLength ?? 0) > limit) return { problem: tooLarge(this.maxBodyBytes) };
    let bytes: Uint8Array | undefined;
    try {
      bytes = await read(limit);
    } catch (err) {
      return failedRead(err);
    }
    return bytes === undefined ? { problem: tooLarge(this.maxBodyBytes) } : { bytes };
  }

  /** The binary message decoded, or the problem with it. */
  decodeBinary(data: Uint8Array): { message: Message; problem?: undefined } | { problem: RegistryError } {
    try {
      return { message: fromBinary(this.method.input, data) };
    } catch (err) {
      const message = `The protobuf message cannot be decoded: ${err instanceof Error ? err.message : String(err)}.`;
      return { problem: this.refuse("MALFORMED_PROTOBUF", message) };
    }
  }
}
