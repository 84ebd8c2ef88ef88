import { type DescField, type DescMessage, type DescService, type JsonObject, ScalarType } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { challengeOf, ERRORS, type ErrorCode, RegistryError } from "../../../domain/errors.js";
import type { Policy } from "../../../operations/registry-operations.js";
import { HEADER_FIELDS } from "../request.js";
import { buildRouteTable, type RestRoute } from "../route-table.js";
import { createMessageSchemas, type MessageSchemas } from "./message-schemas.js";
import { leadingComment } from "./proto-comments.js";
import {
  FILTER_VALUE_LENGTH,
  FILTER_VALUES,
  KEYWORDS_LENGTH,
  REQUEST_LINE_BUDGET,
  refineQuerySchema,
} from "./query-parameters.js";

export interface OpenApiOptions {
  /** The services whose `google.api.http` bindings make up the REST surface. */
  readonly services: readonly DescService[];
  /** The security domains each RPC needs (any one of them), by `Service/Method`. */
  readonly policy: Policy;
  /** The messages of the two error bodies (asor.v1.Error and ValidationError), which no RPC names. */
  readonly errorBodies: { readonly error: DescMessage; readonly validation: DescMessage };
}

/** The components of the error bodies, by the contract's names (docs/contract.md, "Errors"). */
const ERROR = "ERROR_MODEL_REFERENCE";
const VALIDATION_ERROR = "VALIDATION_ERROR_MODEL_REFERENCE";

const SUMMARY =
  "The REST surface of the agent definition registry: register Agent Definitions (create or update on name + " +
  "provider + version) and read them back.";

const DESCRIPTION = [
  SUMMARY,
  "Each path of the registry exists twice: `/api/asor/v1/{tenant}/...` names the tenant (the reference text's " +
    "form); `/asor/v1/...` acts on the tenant of the caller's token, else the service's default tenant (the " +
    "contract's form). The same operations are served over gRPC, gRPC-Web and Connect as " +
    "`asor.v1.AgentDefinitionService` and `asor.v1.TenantAdminService`.",
  "Every call needs `Authorization: Bearer <access token>`; each operation names the security domains it needs " +
    "(any one suffices). A path outside this document answers 404, a path here with a method it does not list " +
    "answers 405 with an `Allow` header (see the component response `MethodNotAllowed`); both carry the validation " +
    "error body.",
  "Members marked `readOnly` are filled in by the service; they are accepted on input and replaced, so a client " +
    "can POST back what it read. Unknown members and query parameters are refused with 400, naming them.",
  "Errors carry a stable `code` (clients branch on the code, never on the message): the request's as a whole, and " +
    "each problem's in `errors`.",
  "A request's line and headers together must fit in 16 KiB (Node's `--max-http-header-size`); a longer one is " +
    "refused with 431. The limits of the list's query parameters here are those under which any query this document " +
    `allows keeps its request line within ${REQUEST_LINE_BUDGET / 1024} KiB, every character percent-encoded at its ` +
    `longest, leaving the rest to the headers, \`Authorization\` included: ${FILTER_VALUES} values of up to ` +
    `${FILTER_VALUE_LENGTH} characters for each exact filter, \`q\` up to ${KEYWORDS_LENGTH}. The service takes more ` +
    "(20 values of up to 255 characters a filter, `q` up to 500, as over gRPC and Connect) while the request fits.",
].join("\n\n");

/** Where the paths are: relative to the document's own address, as the service serves it. */
const SERVERS = [
  {
    url: "/",
    description: "The service that serves this document at `/openapi.json`: every path is relative to its origin.",
  },
];

function validationResponse(description: string, headers: JsonObject = {}): JsonObject {
  return {
    description,
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    content: { "application/json": { schema: { $ref: `#/components/schemas/${VALIDATION_ERROR}` } } },
  };
}

function errorResponse(description: string): JsonObject {
  return { description, content: { "application/json": { schema: { $ref: `#/components/schemas/${ERROR}` } } } };
}

const challenge = (description: string): JsonObject => ({
  "WWW-Authenticate": { description, required: true, schema: { type: "string" } },
});

/** The component name of each error status of the REST surface. */
const RESPONSE_NAMES: Readonly<Record<number, string>> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  408: "RequestTimeout",
  409: "Conflict",
  410: "Gone",
  412: "PreconditionFailed",
  413: "PayloadTooLarge",
  415: "UnsupportedMediaType",
  // WATCH_TOO_SLOW: sent as a watch's SSE `error` event, never as a status; named for the table's sake.
  429: "TooManyRequests",
  // Named ahead of the error-table row for a request line and headers past Node's 16 KiB.
  431: "RequestHeaderFieldsTooLarge",
  500: "InternalError",
  503: "Unavailable",
};

/** Which operations can answer a status; every operation can answer the others. */
const APPLIES: Readonly<Record<number, (route: RestRoute) => boolean>> = {
  // Only requests that name something can miss it: a path variable, or a tenant.
  404: (route) =>
    route.segments.some((s) => "variable" in s) || route.method.input.fields.some((f) => f.name === "tenant"),
  // Only writes can collide with other writes or with what exists.
  409: (route) => route.method.idempotency !== MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS,
  // Only requests with a condition (If-Match, If-None-Match: *) can fail it.
  412: (route) => route.method.input.fields.some((f) => HEADER_FIELDS[f.name] !== undefined),
  // Only a body can be late.
  408: (route) => route.body !== "",
  413: (route) => route.body !== "",
  // Only the agent card is withdrawn with its version (CARD_DEACTIVATED).
  // ... and a watch from a compacted revision (REVISION_COMPACTED).
  410: (route) => route.method.name === "GetAgentCard" || route.method.methodKind === "server_streaming",
  // A watch's WATCH_TOO_SLOW comes after its 200, as an SSE `error` event (docs/api.md, "Watch").
  429: () => false,
  415: (route) => route.body !== "",
};

/**
 * The error answers of the REST surface, one per status, made from the error
 * table (src/domain/errors.ts): its codes and their meanings, its body shape,
 * the Bearer challenge of 401 and 403. 405 is METHOD_NOT_ALLOWED below.
 */
const ERROR_RESPONSES: readonly {
  status: number;
  name: string;
  response: JsonObject;
  applies(route: RestRoute): boolean;
}[] = (() => {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of Object.keys(ERRORS) as ErrorCode[]) {
    const status = ERRORS[code].http;
    if (status !== 405) byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return [...byStatus].map(([status, codes]) => {
    const name = RESPONSE_NAMES[status];
    if (name === undefined)
      throw new Error(`The error table answers ${status}, which the OpenAPI document has no name for.`);
    const description = codes.map((code) => `\`${code}\`: ${ERRORS[code].meaning}`).join(" ");
    const example = new RegistryError(codes[0] as ErrorCode, "");
    const header = challengeOf(example);
    const response =
      example.row.body === "validation"
        ? validationResponse(description, header === undefined ? {} : challenge(`\`${header}\``))
        : errorResponse(description);
    return { status, name, response, applies: APPLIES[status] ?? (() => true) };
  });
})();

/** Not an answer of any operation here: of a path of this document called with a method it does not list. */
const METHOD_NOT_ALLOWED = validationResponse(
  `\`METHOD_NOT_ALLOWED\`: ${ERRORS.METHOD_NOT_ALLOWED.meaning} \`Allow\` lists the methods it serves.`,
  {
    Allow: { description: "The methods the path serves.", required: true, schema: { type: "string" } },
  },
);

const SECURITY_SCHEMES = {
  bearerAuth: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "JWT",
    description:
      "An access token from the configured identity provider (`AUTH_ISSUER`: a JWT verified against its keys, or " +
      "an opaque token introspected), or from the local development issuer (`npm run token`). The names in an " +
      "operation's requirement are security domains: the token's domains claim, plus what its scopes map to.",
  },
  OAuth2: {
    type: "oauth2",
    description:
      "The contract's scheme: OAuth 2.0, implicit flow, authorization URL `{auth_url}/super/authorize`, no scopes. " +
      "`{auth_url}` is the identity provider's base URL, which differs per deployment: `auth.example.com` below " +
      "stands for it (an OpenAPI authorization URL must be a URL). Documentation only: the tokens it issues are " +
      "presented as bearer tokens (`bearerAuth`).",
    flows: { implicit: { authorizationUrl: "https://auth.example.com/super/authorize", scopes: {} } },
  },
};

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
 * The conditional headers a route takes: its header-bound fields (rest-request.ts), and If-None-Match on a
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

/** The REST handler's answer to a call that worked: 200, or 201 with `Location` for a POST whose result has an id. */
function success(schemas: MessageSchemas, route: RestRoute): [string, JsonObject] {
  const output = route.method.output;
  if (route.method.methodKind === "server_streaming")
    return [
      "200",
      {
        description:
          "Server-Sent Events, one per change in revision order: `id:` the revision, `event:` the type " +
          "(`ADDED`, `MODIFIED`, `STATUS_CHANGED`, `BOOKMARK`), `data:` one line of JSON " +
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
  const content = { "application/json": { schema: schemas.ref(output) } };
  const readHeaders: JsonObject | undefined = {
    ...(output.typeName === DEFINITION ? { ETag: ETAG_HEADER } : READ_HEADERS[output.typeName]),
    ...(route.verb === "GET" && READS_AT_REVISION.has(output.typeName)
      ? { "X-Registry-Revision": REVISION_HEADER }
      : {}),
  };
  if (route.verb !== "POST")
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
