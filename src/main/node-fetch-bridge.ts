import type { ServerResponse } from "node:http";
import { Readable } from "node:stream";
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
    ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream<Uint8Array>, duplex: "half" } : {}),
  } as RequestInit);
}

/**
 * Writes a fetch Response to a Node response. An HTTP/1.1 answer given before
 * the request body was read in full (a 413, say) closes the connection: the
 * unread rest of the body would otherwise be taken for the next request.
 */
export async function sendFetchResponse(req: NodeRequest, res: NodeResponse, response: Response): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => {
    headers[name] = value;
  });
  const body = new Uint8Array(await response.arrayBuffer());
  headers["content-length"] = String(body.byteLength);
  if (req.httpVersionMajor === 1 && !req.complete) headers.connection = "close";
  // Both Node response kinds take these calls; their typings differ only in `write`.
  (res as ServerResponse).writeHead(response.status, headers);
  res.end(body);
}
