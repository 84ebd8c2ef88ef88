import { type DescField, type DescMessage, type DescService, type JsonObject, ScalarType } from "@bufbuild/protobuf";
import type { Policy } from "../../../operations/registry-operations.js";
import { createMessageSchemas, type MessageSchemas } from "../../encoding/message-schemas.js";
import { leadingComment } from "../../encoding/proto-comments.js";
import { jsonMediaType } from "../../encoding/result-json.js";
import { HEADER_FIELDS } from "../request.js";
import { buildRouteTable, createsOf, type RestRoute } from "../route-table.js";
import {
  DESCRIPTION,
  ERROR,
  ERROR_RESPONSES,
  METHOD_NOT_ALLOWED,
  SECURITY_SCHEMES,
  SERVERS,
  SUMMARY,
  VALIDATION_ERROR,
} from "./openapi-parts.js";
import { refineQuerySchema } from "./query-parameters.js";

export interface OpenApiOptions {
  /** The services whose `google.api.http` bindings make up the REST surface. */
  readonly services: readonly DescService[];
  /** The security domains each RPC needs (any one of them), by `Service/Method`. */
  readonly policy: Policy;
  /** The messages of the two error bodies (asor.v1.Error and ValidationError), which no RPC names. */
  readonly errorBodies: { readonly error: DescMessage; readonly validation: DescMessage };
}

/** An OpenAPI path from a `google.api.http` template: `{name=*}` is `{name}`. */
function openApiPath(template: string): string {
  return template.replace(/\{([a-z_][a-z0-9_]*)=\*\}/g, "{$1}");
}

function withoutAnnotations(schema: JsonObject): JsonObject {
  const { description: _description, readOnly: _readOnly, ...rest } = schema;
  return rest;
}

function parameter(schemas: MessageSchemas, field: DescField, where: "path" | "query"): JsonObject {
  const description = leadingComment(field);
  return {
    name: where === "path" ? field.name : field.jsonName,
    in: where,
    ...(description === "" ? {} : { description }),
    required: where === "path" || schemas.isRequired(field),
    schema:
      where === "query"
        ? refineQuerySchema(field, withoutAnnotations(schemas.field(field)))
        : withoutAnnotations(schemas.field(field)),
  };
}

/**
 * The path variables, then the query parameters: the scalar fields, and the repeated scalar ones
 * (`?tag=a&tag=b`: OpenAPI's default form style, exploded), bound neither by the path nor by the body.
 */
function parameters(schemas: MessageSchemas, route: RestRoute): JsonObject[] {
  const input = route.method.input;
  const byName = (name: string) => input.fields.find((f) => f.name === name) as DescField;
  const inPath = route.segments.flatMap((s) => ("variable" in s ? [s.variable] : []));
  const path = inPath.map((name) => parameter(schemas, byName(name), "path"));
  if (route.body === "*") return path;
  const query = input.fields.filter(
    (f) =>
      (f.fieldKind === "scalar" || (f.fieldKind === "list" && f.listKind === "scalar")) &&
      !inPath.includes(f.name) &&
      f.name !== route.body &&
      HEADER_FIELDS[f.name] === undefined,
  );
  const lastEventId =
    route.method.methodKind === "server_streaming"
      ? [
          {
            name: "Last-Event-ID",
            in: "header",
            required: false,
            description: "The revision to resume after (an EventSource sends its last `id:`); `since` wins.",
            schema: { type: "string", pattern: "^[0-9]{1,15}$" },
          },
        ]
      : [];
  return [...path, ...query.map((f) => parameter(schemas, f, "query")), ...headerParameters(route), ...lastEventId];
}

/**
 * The conditional headers a route takes: its header-bound fields (rest/request.ts), and If-None-Match on a
 * read with an ETag.
 */
function headerParameters(route: RestRoute): JsonObject[] {
  const headers: JsonObject[] = [];
  for (const field of route.method.input.fields) {
    const header = HEADER_FIELDS[field.name];
    if (header === "If-Match") {
      headers.push({
        name: header,
        in: "header",
        description:
          "Write only if the definition's current ETag is one of these (`*`: if it exists); else 412, nothing written.",
        required: false,
        schema: { type: "string" },
      });
    } else if (header === "If-None-Match") {
      headers.push({
        name: header,
        in: "header",
        description: "`*`: create only; 412 when the key exists, nothing written.",
        required: false,
        schema: { type: "string", const: "*" },
      });
    }
  }
  if (route.verb === "GET" && readsWithEtag(route)) {
    headers.push({
      name: "If-None-Match",
      in: "header",
      description: "The ETags the caller holds: when the current one is among them, 304 without a body.",
      required: false,
      schema: { type: "string" },
    });
  }
  return headers;
}

const ETAG_HEADER: JsonObject = {
  description: "The strong ETag of this revision of the definition: the same as `meta.etag`.",
  required: true,
  schema: { type: "string" },
};

/** The header of a get's and a list's answer (src/http/http-answer.ts's REVISION_HEADER). */
const REVISION_HEADER: JsonObject = {
  description:
    "The tenant revision the read was made at (a decimal int64): the answer holds every change up to it and " +
    "none after it. A list's body carries the same value as `revision`.",
  required: true,
  schema: { type: "string", pattern: "^[0-9]+$" },
};

/** The reads that answer the revision they read at (their REST answers carry REVISION_HEADER). */
const READS_AT_REVISION: ReadonlySet<string> = new Set([
  "asor.v1.AgentDefinition",
  "asor.v1.ListAgentDefinitionsResponse",
  "asor.v1.ListAgentDefinitionVersionsResponse",
]);

/** Whether a read's answer carries an ETag, so If-None-Match can answer 304. */
function readsWithEtag(route: RestRoute): boolean {
  return route.method.output.typeName === DEFINITION || READ_HEADERS[route.method.output.typeName]?.ETag !== undefined;
}

/** The message of one definition: every answer of one carries its ETag. */
const DEFINITION = "asor.v1.AgentDefinition";

/**
 * Responses that are one definition or a page of them: a status change by a version's id answers
 * that version alone over REST (with its ETag), by an `Agent_ID=...` the page (README, "Lifecycle").
 */
const ONE_OR_PAGE: ReadonlySet<string> = new Set(["asor.v1.SetAgentDefinitionStatusResponse"]);

/** JSON, or the same JSON as the one part of a multipart/form-data body (named as the REST handler names it). */
function requestBody(schemas: MessageSchemas, route: RestRoute): JsonObject {
  const input = route.method.input;
  const field = input.fields.find((f) => f.name === route.body);
  if (route.body === "*" && route.segments.some((s) => "variable" in s))
    throw new Error(
      `${route.method.name}: a "*" body beside path variables needs a schema without them; teach the generator`,
    );
  const target: DescMessage | undefined =
    route.body === "*" ? input : field?.fieldKind === "message" ? field.message : undefined;
  if (target === undefined) throw new Error(`${route.method.name}: body ${route.body} must be a message`);
  const part = field?.jsonName ?? "body";
  const schema = schemas.ref(target);
  return {
    description:
      `The ${target.name} as JSON, or as the JSON of the part \`${part}\` of a multipart/form-data body ` +
      "(sent as a field or a file).",
    required: true,
    content: {
      "application/json": { schema },
      "multipart/form-data": {
        schema: { type: "object", properties: { [part]: schema }, required: [part], additionalProperties: false },
        encoding: { [part]: { contentType: "application/json" } },
      },
    },
  };
}

/** The headers of a read's answer by its message: the caching headers A2A v1.0 asks of agent card endpoints. */
const READ_HEADERS: Readonly<Record<string, JsonObject>> = {
  "asor.v1.AgentCard": {
    ETag: {
      description: "A strong validator of the card: it changes whenever the definition does.",
      required: true,
      schema: { type: "string" },
    },
    "Cache-Control": {
      description:
        "`private, no-cache`: the caller may keep the card but revalidates it with its ETag (`If-None-Match`) " +
        "before each reuse.",
      required: true,
      schema: { type: "string" },
    },
  },
};

/**
 * The REST handler's answer to a call that worked: 200, or 201 with `Location` for a POST with a body (createsOf)
 * whose result has an id.
 */
function success(schemas: MessageSchemas, route: RestRoute): [string, JsonObject] {
  const output = route.method.output;
  if (route.method.methodKind === "server_streaming")
    return [
      "200",
      {
        description:
          "Server-Sent Events, one per change in revision order: `id:` the revision, `event:` the type " +
          "(`ADDED`, `MODIFIED`, `STATUS_CHANGED`, `LIVENESS_CHANGED`, `BOOKMARK`), `data:` one line of JSON " +
          '`{"type","revision","definition"}` (the definition as GET answers it; none in a BOOKMARK). A failure ' +
          "after the start is an `error` event whose data is the error body, then the end. Resume with " +
          `\`Last-Event-ID\` or \`since\` (docs/api.md, "Watch"). Over gRPC and Connect each event is ` +
          `a ${output.name}.`,
        content: { "text/event-stream": { schema: { type: "string" } } },
      },
    ];
  if (ONE_OR_PAGE.has(output.typeName)) {
    const definition = output.fields.find((f) => f.name === "data")?.message;
    if (definition === undefined) throw new Error(`${output.typeName} has no data of definitions`);
    return [
      "200",
      {
        description:
          `A version's id: the ${definition.name} as stored now, with its ETag. ` +
          `An \`Agent_ID=...\`: the ${output.name}, every version of the agent, newest first.`,
        headers: {
          ETag: {
            ...ETAG_HEADER,
            required: false,
            description: "With a version's id: its strong ETag, as `meta.etag`.",
          },
        },
        content: { "application/json": { schema: { oneOf: [schemas.ref(definition), schemas.ref(output)] } } },
      },
    ];
  }
  const content = {
    [jsonMediaType(output)]: { schema: schemas.ref(output) },
  };
  const readHeaders: JsonObject | undefined = {
    ...(output.typeName === DEFINITION ? { ETag: ETAG_HEADER } : READ_HEADERS[output.typeName]),
    ...(route.verb === "GET" && READS_AT_REVISION.has(output.typeName)
      ? { "X-Registry-Revision": REVISION_HEADER }
      : {}),
  };
  if (!createsOf(route))
    return [
      "200",
      {
        description: `The ${output.name}.`,
        ...(Object.keys(readHeaders).length === 0 ? {} : { headers: readHeaders }),
        content,
      },
    ];
  const id = output.fields.find(
    (f) => f.jsonName === "id" && f.fieldKind === "scalar" && f.scalar === ScalarType.STRING,
  );
  if (id === undefined) return ["201", { description: `The ${output.name} as stored.`, content }];
  return [
    "201",
    {
      description: `The ${output.name} as stored, with its \`id\` and read-only members.`,
      headers: {
        Location: {
          description: "This path followed by `/{id}`: where the stored instance is read back.",
          required: true,
          schema: { type: "string" },
        },
        ...(output.typeName === DEFINITION ? { ETag: ETAG_HEADER } : {}),
      },
      content,
    },
  ];
}

/**
 * The security domains of the route's RPC, any one of which suffices; an RPC the policy does not name stops
 * the generator.
 */
function domainsOf(policy: Policy, route: RestRoute): readonly string[] {
  const procedure = `${route.method.parent.typeName}/${route.method.name}`;
  const domains = policy.get(procedure);
  if (domains === undefined || domains.length === 0)
    throw new Error(`${procedure} has a REST binding but no security domains in the policy`);
  return domains;
}

function operation(schemas: MessageSchemas, policy: Policy, route: RestRoute, operationId: string): JsonObject {
  const comment = leadingComment(route.method);
  const domains = domainsOf(policy, route);
  const needs = `Needs the security domain ${domains.map((d) => `\`${d}\``).join(" or ")}.`;
  const summary = /^.*?\.(?=\s|$)/.exec(comment)?.[0] ?? route.method.name;
  const body: JsonObject = route.body === "" ? {} : { requestBody: requestBody(schemas, route) };
  const [status, ok] = success(schemas, route);
  const responses: JsonObject = { [status]: ok };
  if (route.verb === "GET" && readsWithEtag(route)) {
    responses["304"] = {
      description: "If-None-Match names the current ETag: not modified, no body.",
      headers: { ETag: ETAG_HEADER },
    };
  }
  for (const e of ERROR_RESPONSES)
    if (e.applies(route)) responses[String(e.status)] = { $ref: `#/components/responses/${e.name}` };
  return {
    operationId,
    tags: [route.method.parent.name],
    summary,
    description: comment === "" ? needs : `${comment}\n\n${needs}`,
    parameters: parameters(schemas, route),
    ...body,
    responses,
    // Alternatives: a token with any one of the domains (OpenAPI 3.1 role names for a non-OAuth scheme).
    security: domains.map((domain) => ({ bearerAuth: [domain] })),
  };
}

/**
 * The OpenAPI 3.1 document of the REST surface, made from the same
 * descriptors the service runs on: the paths and bodies from the
 * `google.api.http` rules (through the REST handler's own route table), the
 * JSON names, required members and limits from the messages and their
 * protovalidate rules, descriptions from the proto comments (present when the
 * descriptors come from a `buf build` image). Pure: the same descriptors give
 * the same document.
 */
export function createOpenApiDocument({ services, policy, errorBodies }: OpenApiOptions): JsonObject {
  const schemas = createMessageSchemas({
    [errorBodies.error.typeName]: ERROR,
    [errorBodies.validation.typeName]: VALIDATION_ERROR,
  });
  schemas.ref(errorBodies.validation);
  schemas.ref(errorBodies.error);
  const paths: Record<string, JsonObject> = {};
  const bindings = new Map<string, number>();
  for (const route of buildRouteTable(services)) {
    const n = (bindings.get(route.method.name) ?? 0) + 1;
    bindings.set(route.method.name, n);
    const operationId = n === 1 ? route.method.localName : `${route.method.localName}_${n}`;
    const path = openApiPath(route.template);
    paths[path] = { ...paths[path], [route.verb.toLowerCase()]: operation(schemas, policy, route, operationId) };
  }
  return {
    openapi: "3.1.0",
    info: { title: "Agent definition registry", summary: SUMMARY, description: DESCRIPTION, version: "v1" },
    servers: SERVERS,
    tags: services.map((s) => ({ name: s.name, description: leadingComment(s) })),
    paths,
    components: {
      schemas: schemas.components(),
      responses: {
        ...Object.fromEntries(ERROR_RESPONSES.map((e) => [e.name, e.response])),
        MethodNotAllowed: METHOD_NOT_ALLOWED,
      },
      securitySchemes: SECURITY_SCHEMES,
    },
  };
}

/** The document as committed in gen/openapi.json and served at /openapi.json: two-space JSON and a final newline. */
export function formatOpenApiDocument(document: unknown): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}
