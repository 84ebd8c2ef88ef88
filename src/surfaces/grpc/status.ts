/**
 * A gRPC call's status trailers, as Connect writes them (`setTrailerStatus`: `grpc-status`, `grpc-message`,
 * `grpc-status-details-bin`) but for the message's encoding. gRPC's wire spec (PROTOCOL-HTTP2.md,
 * Status-Message) percent-encodes only what a header cannot carry: bytes outside 0x20-0x7E, and `%`.
 * Connect encodes with `encodeURIComponent`, which also encodes `;` `,` `:` `/` `?` `@` `&` `=` `+` `$`
 * `#`; the spec lets a decoder decode those, but @grpc/grpc-js decodes with `decodeURI`, which leaves
 * exactly those encoded, so a Node service on grpc-js read "pageToken is malformed%3B pass back ...".
 * Encoded as the spec's minimum, every client reads the same text: grpc-js, Connect (`decodeURIComponent`),
 * gRPC's C core and Go (buf curl, grpcurl).
 */
import type { ConnectError } from "@connectrpc/connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";

/** Sets `grpc-status`, `grpc-message` (the spec's minimal percent-encoding) and the details of `error`. */
export function setGrpcStatus(trailers: Headers, error: ConnectError | undefined): Headers {
  setTrailerStatus(trailers, error);
  if (error !== undefined) trailers.set("grpc-message", grpcMessageEncoded(error.rawMessage));
  return trailers;
}

const encoder = new TextEncoder();

/** `message` as a gRPC Status-Message: UTF-8, each byte outside 0x20-0x7E and each `%` as `%XX`. */
export function grpcMessageEncoded(message: string): string {
  // Printable ASCII without %: as it is (nearly every message the registry has).
  if (/^[\x20-\x24\x26-\x7e]*$/.test(message)) return message;
  let out = "";
  for (const byte of encoder.encode(message)) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}
