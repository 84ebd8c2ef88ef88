/**
 * The message of an RPC the edge serves itself (binary gRPC, Connect unary POSTs), read whole within the body
 * limit, inflated with the router's own compressions, checked and decoded once, before the operation runs, so a
 * malformed message is a 400 / INVALID_ARGUMENT with the registry's error detail, as REST reports it:
 *
 * - JSON: invalid UTF-8, a member given twice (JSON.parse keeps the last), nesting beyond MAX_JSON_DEPTH,
 *   unknown members and wrong types (each with its path); proto names are accepted too.
 * - binary: a message protobuf-es cannot decode (broken wire format, invalid UTF-8 in a string).
 * - a body over the limit: PAYLOAD_TOO_LARGE, without reading past it; a compressed message that inflates
 *   past it: the same; one that cannot be decompressed: MALFORMED_COMPRESSION.
 *
 * Connect's router checks its messages the same way (router/message-check.ts).
 */
import { type DescMethod, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Compression } from "@connectrpc/connect/protocol";
import type { Operations } from "../../operations/operation.js";
import { type BodyRead, MessageDecoder, oneEnvelope } from "./message-decoder.js";
import type { RpcMessage } from "./pipeline.js";

/** The checks of one method's messages, as the surfaces the edge serves itself read them. */
export interface MessageCheck {
  /**
   * The message of a binary gRPC request (grpc/unary.ts, grpc/stream.ts): read within the limit, inflated with
   * `compression` (the request's `grpc-encoding`; null: none), decoded once. Or the problem with it, or
   * (`failure`) a broken envelope or a client gone mid-body, as Connect would raise them.
   */
  grpcMessage(read: BodyRead, contentLength: string | undefined, compression: Compression | null): Promise<RpcMessage>;
  /**
   * The message of a Connect unary POST (connect/unary.ts): read within the limit, inflated with `compression`
   * (its `content-encoding`), checked and decoded once (`binary`: protobuf, else JSON through the one body
   * check). Or the problem with it, or the failure Connect would raise.
   */
  connectMessage(
    read: BodyRead,
    contentLength: string | undefined,
    compression: Compression | null,
    binary: boolean,
  ): Promise<RpcMessage>;
}

/** The checks of `method`'s messages: the JSON ones are the one body check (body-check.ts). */
export function createMessageCheck(
  method: DescMethod,
  maxBodyBytes: number,
  compressions: readonly Compression[] = [],
): MessageCheck {
  const decoder = new MessageDecoder(method, maxBodyBytes, compressions);
  return {
    async grpcMessage(read, contentLength, compression) {
      const whole = await decoder.readWhole(read, contentLength, maxBodyBytes + 5);
      if (whole.bytes === undefined) return whole;
      const frame = oneEnvelope(whole.bytes);
      if ("failure" in frame) return frame;
      const inflated = await decoder.inflate(frame, compression);
      return inflated.problem !== undefined ? inflated : decoder.decodeBinary(inflated.data);
    },

    async connectMessage(read, contentLength, compression, binary) {
      const whole = await decoder.readWhole(read, contentLength, maxBodyBytes);
      if (whole.bytes === undefined) return whole;
      const inflated = await decoder.inflate({ data: whole.bytes, compressed: compression !== null }, compression);
      if (inflated.problem !== undefined) return inflated;
      if (binary) return decoder.decodeBinary(inflated.data);
      const json = decoder.checkJson(inflated.data);
      if (json.problem !== undefined) return { problem: json.problem };
      try {
        return { message: fromJson(method.input, json.value as JsonValue, { ignoreUnknownFields: false }) };
      } catch (err) {
        // What the check lets through, protobuf-es converts; should it not, Connect's own words for it.
        return { failure: ConnectError.from(err, Code.InvalidArgument) };
      }
    },
  };
}

/** The check of an operation's method (made once for each, at start). */
export type Checks<Check> = (method: DescMethod) => Check;

/** The message check of every operation's RPC, made once by `make` (this file's, or the router's). */
export function checksOf<Check>(operations: Operations, make: (method: DescMethod) => Check): Checks<Check> {
  const checks = new Map([...operations.keys()].map((method) => [method, make(method)]));
  return (method) => {
    const check = checks.get(method);
    if (check === undefined) throw new Error(`${method.name} has no operation, so no message check.`);
    return check;
  };
}

/** The message checks of the surfaces the edge serves itself. */
export type MessageChecks = Checks<MessageCheck>;
