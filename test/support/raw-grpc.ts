import { connect } from "node:http2";
import type { ConnectError } from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";

/** How the envelope is framed: its flags byte (1 = compressed) and extra request headers (`grpc-encoding`). */
export interface RawGrpcFraming {
  readonly flags?: number;
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * Sends `message` (any bytes, as they are, in one envelope, uncompressed
 * unless `framing` says otherwise) to a unary gRPC method over HTTP/2 and
 * resolves with the error its trailers carry (undefined for OK), so a test
 * can send what no generated client would encode.
 */
export function rawGrpcCall(
  baseUrl: string,
  authorization: string,
  rpc: string,
  message: Uint8Array,
  framing: RawGrpcFraming = {},
): Promise<ConnectError | undefined> {
  return new Promise((resolve, reject) => {
    const session = connect(baseUrl);
    session.on("error", reject);
    const stream = session.request({
      ":method": "POST",
      ":path": `/${rpc}`,
      "content-type": "application/grpc+proto",
      te: "trailers",
      authorization,
      ...framing.headers,
    });
    const frame = Buffer.alloc(5 + message.byteLength);
    frame[0] = framing.flags ?? 0;
    frame.writeUInt32BE(message.byteLength, 1);
    frame.set(message, 5);
    const received = new Headers();
    const take = (h: Record<string, unknown>): void => {
      for (const [name, value] of Object.entries(h))
        if (!name.startsWith(":") && value !== undefined) received.set(name, String(value));
    };
    stream.on("response", take);
    stream.on("trailers", take);
    stream.on("data", () => undefined);
    stream.on("error", reject);
    stream.on("close", () => {
      session.close();
      resolve(findTrailerError(received));
    });
    stream.end(frame);
  });
}
