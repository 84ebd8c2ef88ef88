import { RegistryError, unavailable } from "../domain/errors.js";

/** A plain HTTP endpoint at an exact path (the shape of app.ts's `HttpEndpoint`). */
export interface ProbeEndpoint {
  readonly path: string;
  handle(request: Request): Promise<Response>;
}

/**
 * The HTTP probes of an orchestrator or load balancer, without authentication
 * (they carry no data):
 * - `/healthz` (liveness): 200 while the process answers at all. It does not
 *   look at the database, so an outage of the database never gets a healthy
 *   process restarted.
 * - `/readyz` (readiness): 200 while the database answers `ping`, else 503
 *   with the spec's error body, code `UNAVAILABLE`, so traffic goes elsewhere
 *   until it is back.
 */
export function createProbeEndpoints(ping: () => Promise<void>): ProbeEndpoint[] {
  return [
    { path: "/healthz", handle: probe(async () => [200, { status: "ok" }]) },
    {
      path: "/readyz",
      handle: probe(async () => {
        try {
          await ping();
          return [200, { status: "ok" }];
        } catch (err) {
          const error = err instanceof RegistryError ? err : unavailable(err);
          return [503, { error: error.message, code: "UNAVAILABLE" }];
        }
      }),
    },
  ];
}

/** A GET/HEAD endpoint answering JSON that no cache may keep. */
function probe(answer: () => Promise<[status: number, body: object]>): (request: Request) => Promise<Response> {
  return async (request) => {
    if (request.method !== "GET" && request.method !== "HEAD") {
      const message = `${request.method} is not allowed here; use GET or HEAD.`;
      return json(405, { error: message, errors: [{ error: message, code: "METHOD_NOT_ALLOWED" }] }, { allow: "GET, HEAD" });
    }
    const [status, body] = await answer();
    return json(status, request.method === "HEAD" ? null : body, { "cache-control": "no-store" });
  };
}

function json(status: number, body: object | null, headers: Record<string, string>): Response {
  return new Response(body === null ? null : JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
}
