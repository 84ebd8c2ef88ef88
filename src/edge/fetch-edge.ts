/**
 * The fetch adapter of the edge (edge.ts), for runtimes that serve web
 * Requests (Deno.serve): it begins each request's record, hands the edge a
 * view of the Request, and answers what the edge answers as a Response.
 *
 * gRPC is refused: it sends its status in HTTP trailers, which a fetch
 * Response cannot carry, so every call would end without one. The refusal is
 * a gRPC "trailers-only" answer (the status in the headers), which gRPC
 * clients read as UNIMPLEMENTED with the message below.
 */
import { universalServerRequestFromFetch, universalServerResponseToFetch } from "@connectrpc/connect/protocol";
import type { RequestTracker } from "../observability/request-tracker.js";
import type { Edge, EdgeRequest } from "./edge.js";

/** gRPC's content types (`application/grpc`, `+proto`, `+json`), not gRPC-Web's. */
const GRPC_CONTENT_TYPE = /^application\/grpc(?:\+[^;\s]*)?\s*(?:;|$)/i;

async function* noBody(): AsyncIterable<Uint8Array> {}

function edgeRequest(request: Request, url: URL): EdgeRequest {
  return {
    method: request.method,
    target: url.pathname + url.search,
    header: (name) => request.headers.get(name) ?? undefined,
    body: () => request.body ?? noBody(),
    universal: (contextValues) => ({ ...universalServerRequestFromFetch(request, {}), contextValues }),
  };
}

/** The edge as a fetch handler. */
export function fetchEdge(edge: Edge, requests: RequestTracker): (request: Request) => Promise<Response> {
  return async (request) => {
    const url = new URL(request.url);
    const record = requests.start({ method: request.method, path: url.pathname, requestIdHeader: request.headers.get("x-request-id") });
    let response: Response;
    if (GRPC_CONTENT_TYPE.test(request.headers.get("content-type") ?? "")) {
      record.protocol = "grpc";
      response = grpcUnavailable();
    } else {
      const answer = await edge(edgeRequest(request, url), record);
      if (answer.rpc !== undefined) {
        response = universalServerResponseToFetch(answer.rpc);
      } else {
        const { status, headers, body } = answer.http;
        response = new Response(body as BodyInit | null, { status, headers });
      }
    }
    response.headers.set("x-request-id", record.id);
    requests.finish(record, { status: response.status, completed: true, wireCode: undefined });
    return response;
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
