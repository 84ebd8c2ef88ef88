/**
 * Where a Node request came from and where it was sent, as the edge reads them (EdgeRequest's `addresses` and
 * `authority`): the addresses of the socket it arrived on, and the authority of its target. The development
 * sign-in answers only a request of a loopback socket sent to a loopback authority (catalog-sign-in.ts).
 */
import type { IncomingHttpHeaders } from "node:http2";
import type { RequestAddresses } from "../surfaces/edge.js";

/** What a Node socket says of its addresses (net.Socket, and the replaying one of deno-socket.ts). */
interface AddressedSocket {
  readonly localAddress?: string | undefined;
  readonly remoteAddress?: string | undefined;
}

const UNKNOWN: RequestAddresses = { local: undefined, remote: undefined };

/** The addresses of the socket `socket()` gives; unknown when there is none any more. */
export function socketAddresses(socket: () => AddressedSocket | undefined | null): RequestAddresses {
  try {
    const s = socket();
    return s === undefined || s === null ? UNKNOWN : { local: s.localAddress, remote: s.remoteAddress };
  } catch {
    // An HTTP/2 request's socket is a proxy of its session's, which throws once the stream is gone.
    return UNKNOWN;
  }
}

/**
 * The authority a request was sent to: its `:authority` (HTTP/2), else its `Host` (HTTP/1.1, or an HTTP/2
 * request without `:authority`, RFC 9113 §8.3.1). Undefined when it has none; when `Host` is repeated (Node keeps
 * the first in `headers`, so the count is read from `rawHeaders` where there are some); and when an HTTP/2
 * request's `host` differs from its `:authority` (a request RFC 9113 §8.3.1 calls malformed): which of the two the
 * request was sent to cannot be told.
 */
export function authorityOf(headers: IncomingHttpHeaders, rawHeaders?: readonly string[]): string | undefined {
  const host = headers.host;
  if (Array.isArray(host) || (rawHeaders !== undefined && hostLines(rawHeaders) > 1)) return undefined;
  const pseudo = headers[":authority"];
  if (pseudo === undefined) return host;
  return host === undefined || host === pseudo ? pseudo : undefined;
}

/** How many `Host` lines are in `rawHeaders` (names and values, alternating). */
function hostLines(rawHeaders: readonly string[]): number {
  let lines = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]?.toLowerCase() === "host") lines++;
  return lines;
}
