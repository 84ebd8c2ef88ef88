import { utf8 } from "../http/http-answer.js";
import { type HttpEndpoint, readOnly } from "../http/http-endpoint.js";
import type { Metrics } from "./metrics.js";

/**
 * `GET /metrics`: the Prometheus text exposition. It has no authentication
 * (scrapers rarely carry tokens) and reveals no registry data, only counts
 * and timings by operation; serve it to the monitoring network, not the
 * internet.
 */
export function createMetricsEndpoint(metrics: Metrics): HttpEndpoint {
  return {
    path: "/metrics",
    handle: readOnly(async () => {
      const { contentType, body } = await metrics.render();
      return { status: 200, headers: { "content-type": contentType, "cache-control": "no-store" }, body: utf8(body) };
    }),
  };
}
