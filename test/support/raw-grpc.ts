import { type ClientHttp2Session, type ClientHttp2Stream, connect } from "node:http2";
import type { ConnectError } from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";

/** `message` in a gRPC envelope: its flags byte, its length, the bytes as they are. */
function envelope(message: Uint8Array, flags: number): Buffer {
  const frame = Buffer.alloc(5 + message.byteLength);
  frame[0] = flags;
  frame.writeUInt32BE(message.byteLength, 1);
  frame.set(message, 5);
  return frame;
}

/** A binary gRPC POST of `rpc` (`package.Service/Method`) on `session`, with `headers` besides gRPC's own. */
function grpcRequest(
  session: ClientHttp2Session,
  authorization: string,
  rpc: string,
  headers: Readonly<Record<string, string>> = {},
): ClientHttp2Stream {
  return session.request({
    ":method": "POST",
    ":path": `/${rpc}`,
    "content-type": "application/grpc+proto",
    te: "trailers",
    authorization,
    ...headers,
  });
}

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
export async function rawGrpcCall(
  baseUrl: string,
  authorization: string,
  rpc: string,
  message: Uint8Array,
  framing: RawGrpcFraming = {},
): Promise<ConnectError | undefined> {
  return findTrailerError(await rawGrpcAnswer(baseUrl, authorization, rpc, message, framing));
}

/** As rawGrpcCall, but resolves with every header and trailer of the answer as it was sent (no pseudo-headers). */
export function rawGrpcAnswer(
  baseUrl: string,
  authorization: string,
  rpc: string,
  message: Uint8Array,
  framing: RawGrpcFraming = {},
): Promise<Headers> {
  return new Promise((resolve, reject) => {
    const session = connect(baseUrl);
    session.on("error", reject);
    const stream = grpcRequest(session, authorization, rpc, framing.headers);
    const frame = envelope(message, framing.flags ?? 0);
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
      resolve(received);
    });
    stream.end(frame);
  });
}

/** One message of a raw stream as it came: its envelope's flags (1 = compressed) and its bytes. */
export interface RawEnvelope {
  readonly flags: number;
  readonly data: Buffer;
}

/** A server-streaming gRPC call made by hand (rawGrpcStream). */
export interface RawGrpcStream {
  /** The response headers, once they came. */
  readonly headers: Promise<Record<string, string>>;
  /** Stops reading (HTTP/2 flow control then stops the server) and reads on. */
  pause(): void;
  resume(): void;
  /** The messages received so far, in order. */
  readonly envelopes: RawEnvelope[];
  /** Resolves when the stream closed: the error its trailers carry (undefined for OK) and the trailers. */
  readonly closed: Promise<{ error: ConnectError | undefined; trailers: Headers }>;
  close(): void;
}

/**
 * Calls a server-streaming gRPC method over HTTP/2 with `message` (one envelope, as it is) and reads its
 * answer's envelopes by hand: a test sees what a client library hides (each message's compression flag, the
 * headers it consumes) and controls when it reads.
 */
export function rawGrpcStream(
  baseUrl: string,
  authorization: string,
  rpc: string,
  message: Uint8Array,
  headers: Readonly<Record<string, string>> = {},
): RawGrpcStream {
  const session = connect(baseUrl);
  session.on("error", () => undefined);
  const stream = grpcRequest(session, authorization, rpc, headers);
  stream.on("error", () => undefined);
  const frame = envelope(message, 0);
  const envelopes: RawEnvelope[] = [];
  let pending = Buffer.alloc(0);
  stream.on("data", (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 5) {
      const length = pending.readUInt32BE(1);
      if (pending.length < 5 + length) break;
      envelopes.push({ flags: pending[0] as number, data: Buffer.from(pending.subarray(5, 5 + length)) });
      pending = pending.subarray(5 + length);
    }
  });
  const received = new Headers();
  const take = (h: Record<string, unknown>): void => {
    for (const [name, value] of Object.entries(h))
      if (!name.startsWith(":") && value !== undefined) received.set(name, String(value));
  };
  const answered = new Promise<Record<string, string>>((resolve) =>
    stream.once("response", (h: Record<string, unknown>) => {
      take(h);
      resolve(Object.fromEntries(Object.entries(h).map(([name, value]) => [name, String(value)])));
    }),
  );
  stream.on("trailers", take);
  const closed = new Promise<{ error: ConnectError | undefined; trailers: Headers }>((resolve) =>
    stream.on("close", () => {
      session.close();
      resolve({ error: findTrailerError(received), trailers: received });
    }),
  );
  stream.end(frame);
  return {
    headers: answered,
    pause: () => stream.pause(),
    resume: () => stream.resume(),
    envelopes,
    closed,
    close: () => {
      stream.close();
      session.close();
    },
  };
}
