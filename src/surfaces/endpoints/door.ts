/**
 * The plain HTTP doors: the endpoints by exact path (probes, `/metrics`, `/openapi.json`), and the catalog's
 * pages (`/ui/...`, and `/` for a browser). Neither reads a token.
 */
import type { Catalog } from "../../catalog/catalog.js";
import type { HttpEndpoint } from "../../http/http-endpoint.js";
import type { Door } from "../pipeline/door.js";

export function endpointsDoor(endpoints: readonly HttpEndpoint[]): Door<HttpEndpoint> {
  const byPath = new Map(endpoints.map((e) => [e.path, e]));
  return {
    name: "endpoints",
    matches: (_req, { pathname }) => byPath.get(pathname),
    async serve(req, endpoint, record) {
      record.protocol = "http";
      record.endpoint = endpoint.path;
      return { http: await endpoint.handle(req.method) };
    },
  };
}

/** The catalog's door: its paths only, so that the API's own requests go on to REST without an await. */
export function catalogDoor(catalog: Catalog): Door<string> {
  return {
    name: "catalog",
    matches: (_req, { pathname }) => (pathname === "/" || catalog.serves(pathname) ? pathname : undefined),
    async serve(req, pathname, record) {
      const page = await catalog.answer(req, pathname);
      if (page === undefined) return undefined;
      record.protocol = "http";
      record.endpoint = "/ui/";
      return { http: page };
    },
  };
}
