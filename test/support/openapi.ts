import { readFileSync } from "node:fs";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import formats from "ajv-formats";

/** The committed OpenAPI document (gen/openapi.json), parsed. */
export function committedOpenApi(): Record<string, any> {
  return JSON.parse(readFileSync("gen/openapi.json", "utf8"));
}

const DOCUMENT_ID = "urn:asor:openapi";
/**
 * The members of an OpenAPI document beside its schemas: known to Ajv as annotations, so strict mode checks
 * everything else.
 */
const OPENAPI_MEMBERS = [
  "openapi",
  "info",
  "jsonSchemaDialect",
  "servers",
  "paths",
  "webhooks",
  "components",
  "security",
  "tags",
  "externalDocs",
];

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
  /** The media type the document names for the body; undefined when the answer has none. */
  readonly mediaType: string | undefined;
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
  const addFormats = ((formats as unknown as { default?: typeof formats }).default ?? formats) as unknown as (
    a: Ajv2020,
  ) => void;
  addFormats(ajv);
  ajv.addVocabulary(OPENAPI_MEMBERS);
  ajv.addSchema({ ...document, $id: DOCUMENT_ID });
  const at = (tokens: readonly string[]): ValidateFunction =>
    ajv.compile({ $ref: `${DOCUMENT_ID}#${fragment(tokens)}` });

  /** The document's path template for a concrete path, e.g. `/asor/v1/agentDefinition/{id}`. */
  function templateOf(pathname: string): string {
    const matches = Object.keys(document.paths).filter((template) => {
      const pattern = template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^}]+\}/g, "[^/]+");
      return new RegExp(`^${pattern}$`).test(pathname);
    });
    if (matches.length !== 1)
      throw new Error(`${pathname} matches ${matches.length} paths of the document: ${matches.join(", ")}`);
    return matches[0] as string;
  }

  return {
    /** The schema of a component, e.g. `AgentDefinition`. */
    component: (name: string): ValidateFunction => at(["components", "schemas", name]),
    /** The request body schema of an operation for a media type. */
    requestBody(method: string, pathname: string, mediaType: string): ValidateFunction {
      return at(["paths", templateOf(pathname), method.toLowerCase(), "requestBody", "content", mediaType, "schema"]);
    },
    /**
     * What the document says a response with `status` to `method pathname` is; throws when it lists no such
     * response.
     */
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
      const mediaType: string | undefined =
        response.content === undefined ? undefined : Object.keys(response.content)[0];
      return {
        operationId: operation.operationId,
        mediaType,
        requiredHeaders: Object.entries(response.headers ?? {}).flatMap(([name, h]: [string, any]) =>
          h.required ? [name.toLowerCase()] : [],
        ),
        // A response without content (304) has no schema: only an absent body passes. The document names one
        // media type for each (JSON, or a standard's own: the AI Catalog's).
        validate:
          response.content === undefined
            ? noBody()
            : at([...tokens, "content", mediaType ?? "application/json", "schema"]),
      };
    },
    /** The schema of a parameter of an operation, by its name, e.g. `orderBy`. */
    parameter(method: string, pathname: string, name: string): ValidateFunction {
      const template = templateOf(pathname);
      const parameters: { name: string }[] = document.paths[template]?.[method.toLowerCase()]?.parameters ?? [];
      const index = parameters.findIndex((p) => p.name === name);
      if (index === -1) throw new Error(`${method} ${template} has no parameter ${name}`);
      return at(["paths", template, method.toLowerCase(), "parameters", String(index), "schema"]);
    },
    /** A component response, e.g. `MethodNotAllowed`. */
    componentResponse: (name: string): ValidateFunction =>
      at(["components", "responses", name, "content", "application/json", "schema"]),
  };
}

export type OpenApiChecker = ReturnType<typeof createOpenApiChecker>;

/** The check of a response the document gives no content: passes only no body at all. */
function noBody(): ValidateFunction {
  return Object.assign((body: unknown) => body === undefined, { errors: null }) as unknown as ValidateFunction;
}

/**
 * A letter outside the Basic Multilingual Plane (U+1D49C): 4 bytes of UTF-8, 12 percent-encoded, the most a
 * character costs a URL.
 */
export const WIDEST_CHARACTER = "\u{1D49C}";

/**
 * The longest request line the document allows for an operation: every path and query parameter at
 * its longest (repeated ones at their most items), every value percent-encoded. A string bound by a
 * pattern takes its value from `patterned`, by parameter name (its longest form: the caller checks
 * it against the schema); any other string or array needs a maxLength or maxItems, else this throws.
 */
export function longestRequestLine(
  document: Record<string, any>,
  method: string,
  template: string,
  patterned: Readonly<Record<string, string>>,
): string {
  const operation = document.paths[template][method.toLowerCase()];
  let pathname = template;
  const query: string[] = [];
  for (const parameter of operation.parameters as { name: string; in: string; schema: Record<string, any> }[]) {
    if (parameter.in === "header") continue;
    const values = longestValues(parameter.name, parameter.schema, patterned);
    if (parameter.in === "path")
      pathname = pathname.replace(`{${parameter.name}}`, encodeURIComponent(values[0] as string));
    else for (const value of values) query.push(`${parameter.name}=${encodeURIComponent(value)}`);
  }
  return `${method.toUpperCase()} ${pathname}${query.length > 0 ? `?${query.join("&")}` : ""} HTTP/1.1`;
}

function longestValues(
  name: string,
  schema: Record<string, any>,
  patterned: Readonly<Record<string, string>>,
): string[] {
  if (schema.type === "array") {
    if (schema.maxItems === undefined) throw new Error(`${name} has no maxItems: no query with it is bounded`);
    return Array.from({ length: schema.maxItems }, () => longestValues(name, schema.items, patterned)).flat();
  }
  if (schema.enum !== undefined) {
    const values = (schema.enum as unknown[]).map(String);
    return [values.reduce((a, b) => (encodeURIComponent(b).length > encodeURIComponent(a).length ? b : a))];
  }
  if (schema.type === "boolean") return ["false"];
  if (schema.type === "integer") {
    const int32 = schema.format === "int32";
    const bounds = [
      schema.minimum ?? (int32 ? -(2 ** 31) : undefined),
      schema.maximum ?? (int32 ? 2 ** 31 - 1 : undefined),
    ];
    if (bounds.includes(undefined)) throw new Error(`${name} is an unbounded integer`);
    return [bounds.map(String).reduce((a, b) => (b.length > a.length ? b : a))];
  }
  if (schema.pattern !== undefined) {
    const value = patterned[name];
    if (value === undefined) throw new Error(`${name} has a pattern: give its longest value`);
    return [value];
  }
  if (schema.maxLength === undefined) throw new Error(`${name} has no maxLength: no query with it is bounded`);
  return [WIDEST_CHARACTER.repeat(schema.maxLength)];
}
