import { readFileSync } from "node:fs";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import formats from "ajv-formats";

/** The committed OpenAPI document (gen/openapi.json), parsed. */
export function committedOpenApi(): Record<string, any> {
  return JSON.parse(readFileSync("gen/openapi.json", "utf8"));
}

const DOCUMENT_ID = "urn:asor:openapi";
/** The members of an OpenAPI document beside its schemas: known to Ajv as annotations, so strict mode checks everything else. */
const OPENAPI_MEMBERS = ["openapi", "info", "jsonSchemaDialect", "servers", "paths", "webhooks", "components", "security", "tags", "externalDocs"];

/** The JSON pointer of a place in the document, as a URI fragment. */
function fragment(tokens: readonly string[]): string {
  return tokens.map((t) => `/${encodeURIComponent(t.replaceAll("~", "~0").replaceAll("/", "~1"))}`).join("");
}

/** What a response of one operation must be, according to the document. */
export interface ResponseCheck {
  /** The document's operationId of the path and method, e.g. `listAgentDefinitions_2`. */
  readonly operationId: string;
  /** The headers the document requires, lower case. */
  readonly requiredHeaders: readonly string[];
  /** Validates a body against the response's JSON schema; Ajv's errors in `errors`. */
  readonly validate: ValidateFunction;
}

/**
 * JSON Schema validation (Ajv, draft 2020-12, strict, with formats) against
 * an OpenAPI 3.1 document: every `$ref` resolves inside the document.
 */
export function createOpenApiChecker(document: Record<string, any>) {
  const ajv = new Ajv2020({ allErrors: true, strict: true });
  // ajv-formats is CommonJS: its default export is the plugin, or holds it.
  const addFormats = ((formats as unknown as { default?: typeof formats }).default ?? formats) as unknown as (a: Ajv2020) => void;
  addFormats(ajv);
  ajv.addVocabulary(OPENAPI_MEMBERS);
  ajv.addSchema({ ...document, $id: DOCUMENT_ID });
  const at = (tokens: readonly string[]): ValidateFunction => ajv.compile({ $ref: `${DOCUMENT_ID}#${fragment(tokens)}` });

  /** The document's path template for a concrete path, e.g. `/asor/v1/agentDefinition/{id}`. */
  function templateOf(pathname: string): string {
    const matches = Object.keys(document.paths).filter((template) => {
      const pattern = template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^}]+\}/g, "[^/]+");
      return new RegExp(`^${pattern}$`).test(pathname);
    });
    if (matches.length !== 1) throw new Error(`${pathname} matches ${matches.length} paths of the document: ${matches.join(", ")}`);
    return matches[0] as string;
  }

  return {
    /** The schema of a component, e.g. `AgentDefinition`. */
    component: (name: string): ValidateFunction => at(["components", "schemas", name]),
    /** The request body schema of an operation for a media type. */
    requestBody(method: string, pathname: string, mediaType: string): ValidateFunction {
      return at(["paths", templateOf(pathname), method.toLowerCase(), "requestBody", "content", mediaType, "schema"]);
    },
    /** What the document says a response with `status` to `method pathname` is; throws when it lists no such response. */
    response(method: string, pathname: string, status: number): ResponseCheck {
      const template = templateOf(pathname);
      const operation = document.paths[template]?.[method.toLowerCase()];
      if (operation === undefined) throw new Error(`the document has no ${method} ${template}`);
      let tokens = ["paths", template, method.toLowerCase(), "responses", String(status)];
      let response = operation.responses[String(status)];
      if (response === undefined) throw new Error(`the document lists no ${status} for ${method} ${template}`);
      if (typeof response.$ref === "string") {
        const name = response.$ref.replace("#/components/responses/", "");
        tokens = ["components", "responses", name];
        response = document.components.responses[name];
      }
      return {
        operationId: operation.operationId,
        requiredHeaders: Object.entries(response.headers ?? {}).flatMap(([name, h]: [string, any]) => (h.required ? [name.toLowerCase()] : [])),
        // A response without content (304) has no schema: only an absent body passes.
        validate: response.content === undefined ? noBody() : at([...tokens, "content", "application/json", "schema"]),
      };
    },
    /** A component response, e.g. `MethodNotAllowed`. */
    componentResponse: (name: string): ValidateFunction => at(["components", "responses", name, "content", "application/json", "schema"]),
  };
}

export type OpenApiChecker = ReturnType<typeof createOpenApiChecker>;

/** The check of a response the document gives no content: passes only no body at all. */
function noBody(): ValidateFunction {
  return Object.assign((body: unknown) => body === undefined, { errors: null }) as unknown as ValidateFunction;
}
