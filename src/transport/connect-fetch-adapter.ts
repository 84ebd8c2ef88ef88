import { type ConnectRouter, type ConnectRouterOptions, createConnectRouter } from "@connectrpc/connect";
import { createFetchHandler } from "@connectrpc/connect/protocol";

/** A web-standard HTTP handler, as `Deno.serve` (or any fetch-based server) takes it. */
export type FetchHandler = (request: Request) => Promise<Response>;

export interface ConnectFetchAdapterOptions extends ConnectRouterOptions {
  /** Registers the services, as for every other Connect adapter. */
  readonly routes: (router: ConnectRouter) => void;
  /** Answers every request whose path is not an RPC (REST, probes, 404). */
  readonly fallback: FetchHandler;
}

/** gRPC's content types (`application/grpc`, `+proto`, `+json`), not gRPC-Web's. */
const GRPC_CONTENT_TYPE = /^application\/grpc(?:\+[^;\s]*)?\s*(?:;|$)/i;

/**
 * The Connect routes as a fetch handler: Connect and gRPC-Web, by exact RPC
 * path (`/<package.Service>/<Method>`, query ignored), everything else to
 * `fallback`.
 *
 * gRPC is refused: it sends its status in HTTP trailers, which a fetch
 * Response cannot carry, so every call would end without one. The refusal is
 * a gRPC "trailers-only" answer (the status in the headers), which gRPC
 * clients read as UNIMPLEMENTED with the message below. The router's own
 * `grpc: false` cannot do this: service-level options turn gRPC back on.
 */
export function connectFetchAdapter(options: ConnectFetchAdapterOptions): FetchHandler {
  const { routes, fallback, ...routerOptions } = options;
  const router = createConnectRouter(routerOptions);
  routes(router);
  const rpcs = new Map<string, FetchHandler>();
  for (const handler of router.handlers) rpcs.set(handler.requestPath, createFetchHandler(handler));
  return async (request) => {
    const rpc = rpcs.get(new URL(request.url).pathname);
    if (rpc === undefined) return fallback(request);
    if (GRPC_CONTENT_TYPE.test(request.headers.get("content-type") ?? "")) return grpcUnavailable();
    return rpc(request);
  };
}

function grpcUnavailable(): Response {
  return new Response(null, {
    status: 200,
    headers: {
      "content-type": "application/grpc",
      "grpc-status": "12", // UNIMPLEMENTED
      "grpc-message": encodeURIComponent("gRPC needs HTTP trailers, which this server (fetch-based, e.g. Deno) cannot send; use Connect or gRPC-Web here, or the Node server for gRPC"),
    },
  });
}
