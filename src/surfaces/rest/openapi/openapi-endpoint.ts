import { JSON_CONTENT_TYPE, utf8 } from "../../../http/http-answer.js";
import { type HttpEndpoint, readOnly } from "../../../http/http-endpoint.js";
import { formatOpenApiDocument } from "./openapi-document.js";

/**
 * `GET /openapi.json`: the OpenAPI document of the REST surface, without
 * authentication (it describes the API, it holds no data). `document` is the
 * committed gen/openapi.json; it is answered as that file's text, byte for byte.
 */
export function createOpenApiEndpoint(document: unknown): HttpEndpoint {
  const answer = {
    status: 200,
    headers: { "content-type": JSON_CONTENT_TYPE },
    body: utf8(formatOpenApiDocument(document)),
  };
  return { path: "/openapi.json", handle: readOnly(async () => answer) };
}
