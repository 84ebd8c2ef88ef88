import { formatOpenApiDocument } from "./openapi-document.js";

/** A plain HTTP endpoint at an exact path (the shape of app.ts's `HttpEndpoint`). */
export interface OpenApiEndpoint {
  readonly path: string;
  handle(request: Request): Promise<Response>;
}

/**
 * `GET /openapi.json`: the OpenAPI document of the REST surface, without
 * authentication (it describes the API, it holds no data). `document` is the
 * committed gen/openapi.json; it is answered as that file's text, byte for byte.
 */
export function createOpenApiEndpoint(document: unknown): OpenApiEndpoint {
  const text = formatOpenApiDocument(document);
  return {
    path: "/openapi.json",
    async handle(request) {
      if (request.method !== "GET" && request.method !== "HEAD") {
        const message = `${request.method} is not allowed here; use GET or HEAD.`;
        return Response.json({ error: message, errors: [{ error: message, code: "METHOD_NOT_ALLOWED" }] }, { status: 405, headers: { allow: "GET, HEAD" } });
      }
      return new Response(request.method === "HEAD" ? null : text, { status: 200, headers: { "content-type": "application/json; charset=utf-8" } });
    },
  };
}
