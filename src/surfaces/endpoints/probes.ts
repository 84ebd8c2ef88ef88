import { RegistryError, unavailable } from "../../domain/errors.js";
import { errorAnswer, type HttpAnswer, jsonAnswer } from "../../http/http-answer.js";
import { type HttpEndpoint, readOnly } from "../../http/http-endpoint.js";

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
export function createProbeEndpoints(ping: () => Promise<void>): HttpEndpoint[] {
  const ok = (): HttpAnswer => jsonAnswer(200, { status: "ok" }, NO_STORE);
  return [
    { path: "/healthz", handle: readOnly(async () => ok()) },
    {
      path: "/readyz",
      handle: readOnly(async () => {
        try {
          await ping();
          return ok();
        } catch (err) {
          return errorAnswer(asUnavailable(err), NO_STORE);
        }
      }),
    },
  ];
}

const NO_STORE = { "cache-control": "no-store" };

/** The probe's failure: the repository's own UNAVAILABLE, or anything else as one. */
function asUnavailable(err: unknown): RegistryError {
  return err instanceof RegistryError && err.code === "UNAVAILABLE" ? err : unavailable(err);
}
