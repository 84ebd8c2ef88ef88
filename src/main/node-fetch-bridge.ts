import type { ServerResponse } from "node:http";
import type { ConnectNodeAdapterOptions } from "@connectrpc/connect-node";

/** The request and response of a Node handler, HTTP/1.1 or HTTP/2, as connect-node types them. */
export type NodeHandlerArgs = Parameters<NonNullable<ConnectNodeAdapterOptions["fallback"]>>;
type NodeRequest = NodeHandlerArgs[0];
type NodeResponse = NodeHandlerArgs[1];

/**
 * A Node request as a fetch Request. The URL's origin is fixed: only the path
 * and query are used, so a forged Host header changes nothing.
 */
export function toFetchRequest(req: NodeRequest, res: NodeResponse): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (name.startsWith(":") || value === undefined) continue;
    headers.set(name, Array.isArray(value) ? value.join(", ") : String(value));
  }
  const controller = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  const method = req.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD";
  return new Request(new URL(req.url ?? "/", "http://localhost"), {
    method,
    headers,
    signal: controller.signal,
    ...(hasBody ? { body: bodyStream(req), duplex: "half" } : {}),
  } as RequestInit);
}

/**
 * How much of a request body left unread by an early answer (a 413, a 401) is
 * read and thrown away, so that a client still sending gets the answer instead
 * of a connection reset; past it the connection is cut. HTTP_REQUEST_TIMEOUT_MS
 * bounds the time it may take.
 */
const LINGER_BYTES = 8 * 1024 * 1024;

/** Stops a request's body stream from taking more data: what arrives from then on is thrown away. */
const abandon = new WeakMap<NodeRequest, () => void>();

/**
 * The request body as a web stream. Not `Readable.toWeb`: on Node 20, once its
 * stream is cancelled (a body over the limit) data already buffered is still
 * enqueued into the closed stream, and the TypeError that throws escapes as
 * an uncaught exception that stops the process.
 */
function bodyStream(req: NodeRequest): ReadableStream<Uint8Array> {
  let open = true;
  abandon.set(req, () => void (open = false));
  return new ReadableStream<Uint8Array>({
    start(controller) {
      req.on("data", (chunk: Buffer) => {
        if (!open) return;
        controller.enqueue(new Uint8Array(chunk));
        if ((controller.desiredSize ?? 0) <= 0) req.pause();
      });
      req.once("end", () => {
        if (open) controller.close();
        open = false;
      });
      const fail = (err?: Error): void => {
        if (open) controller.error(err ?? new Error("The client closed the connection before the request body ended."));
        open = false;
      };
      req.on("error", fail);
      req.once("close", () => fail());
      req.pause();
    },
    pull() {
      req.resume();
    },
    cancel() {
      open = false;
    },
  });
}

/**
 * Writes a fetch Response to a Node response. After an HTTP/1.1 answer given
 * before the request body was read in full (a 413, say) the rest of the body is
 * read and thrown away, up to LINGER_BYTES, so the client sees the answer; the
 * connection stays usable, or is cut past that.
 */
export async function sendFetchResponse(req: NodeRequest, res: NodeResponse, response: Response): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  const body = new Uint8Array(await response.arrayBuffer());
  headers["content-length"] = String(body.byteLength);
  const unread = req.httpVersionMajor === 1 && !req.complete;
  // Both Node response kinds take these calls; their typings differ only in `write`.
  (res as ServerResponse).writeHead(response.status, headers);
  res.end(body);
  if (unread) discardRest(req);
}

function discardRest(req: NodeRequest): void {
  abandon.get(req)?.();
  let discarded = 0;
  req.on("data", (chunk: Buffer) => {
    discarded += chunk.byteLength;
    if (discarded > LINGER_BYTES) req.socket.destroy();
  });
  req.resume();
}
