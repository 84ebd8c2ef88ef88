import type { Metrics } from "./metrics.js";

/**
 * `GET /metrics`: the Prometheus text exposition. It has no authentication
 * (scrapers rarely carry tokens) and reveals no registry data, only counts
 * and timings by operation; serve it to the monitoring network, not the
 * internet.
 */
export function createMetricsEndpoint(metrics: Metrics): { readonly path: string; handle(request: Request): Promise<Response> } {
  return {
    path: "/metrics",
    async handle(request) {
      if (request.method !== "GET" && request.method !== "HEAD") {
        const message = `${request.method} is not allowed here; use GET or HEAD.`;
        return new Response(JSON.stringify({ error: message, errors: [{ error: message, code: "METHOD_NOT_ALLOWED" }] }), {
          status: 405,
          headers: { "content-type": "application/json; charset=utf-8", allow: "GET, HEAD" },
        });
      }
      const { contentType, body } = await metrics.render();
      return new Response(request.method === "HEAD" ? null : body, { headers: { "content-type": contentType, "cache-control": "no-store" } });
    },
  };
}
