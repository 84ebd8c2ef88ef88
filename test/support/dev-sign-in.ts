/**
 * Requests to the development sign-in (`POST /ui/dev-token`) as a browser or a forger would send them: over
 * HTTP/1.1 with any Host lines (written on the socket as they are given, repeated ones included), over HTTP/2 with
 * any `:authority` and `host`; and this machine's own address that is not loopback, to reach a server the way
 * another machine would (the socket's addresses then are not loopback).
 */
import { connect as http2Connect } from "node:http2";
import { connect } from "node:net";
import { networkInterfaces } from "node:os";

/** A body the development sign-in answers with a token. */
export const DEV_TOKEN_BODY = '{"tenant":"default","domains":["Development"]}';

export interface RawAnswer {
  readonly status: number;
  readonly body: string;
}

/** The first IPv4 address of this machine that is not loopback, or undefined when it has none. */
export function nonLoopbackIPv4(): string | undefined {
  for (const addresses of Object.values(networkInterfaces()))
    for (const a of addresses ?? []) if (a.family === "IPv4" && !a.internal) return a.address;
  return undefined;
}

/**
 * A JSON POST of DEV_TOKEN_BODY to `path` over HTTP/1.1 on `address`:`port`, its head written byte for byte: each
 * of `hosts` as a Host line of its own, then `headers`.
 */
export function devTokenHttp1(
  address: string,
  port: number,
  hosts: readonly string[],
  headers: Record<string, string> = {},
  path = "/ui/dev-token",
): Promise<RawAnswer> {
  const body = DEV_TOKEN_BODY;
  const lines = [
    `POST ${path} HTTP/1.1`,
    ...hosts.map((h) => `Host: ${h}`),
    "Content-Type: application/json",
    `Content-Length: ${Buffer.byteLength(body)}`,
    "Connection: close",
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
  ];
  return new Promise((resolve, reject) => {
    // Written, not ended: the server's sockets are not half-open, so the client's end would close it unanswered.
    const socket = connect(port, address, () => socket.write(`${lines.join("\r\n")}\r\n\r\n${body}`));
    const chunks: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.once("error", reject);
    socket.once("close", () => {
      const text = Buffer.concat(chunks).toString();
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, body: text.slice(text.indexOf("\r\n\r\n") + 4) });
    });
  });
}

/** A JSON POST of DEV_TOKEN_BODY to /ui/dev-token over HTTP/2 (prior knowledge) on `address`:`port`, with `headers`. */
export function devTokenHttp2(
  address: string,
  port: number,
  headers: { readonly ":authority": string; readonly host?: string },
): Promise<RawAnswer> {
  const session = http2Connect(`http://${address}:${port}`);
  return new Promise<RawAnswer>((resolve, reject) => {
    session.once("error", reject);
    const stream = session.request({
      ":method": "POST",
      ":path": "/ui/dev-token",
      "content-type": "application/json",
      ...headers,
    });
    let status = 0;
    const chunks: Buffer[] = [];
    stream.once("response", (head) => {
      status = Number(head[":status"]);
    });
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.once("error", reject);
    stream.once("end", () => resolve({ status, body: Buffer.concat(chunks).toString() }));
    stream.end(DEV_TOKEN_BODY);
  }).finally(() => session.close());
}

/** The first error code of a refusal's body (the spec's error shape). */
export function errorCode(answer: RawAnswer): string | undefined {
  return (JSON.parse(answer.body) as { errors: { code: string }[] }).errors[0]?.code;
}
