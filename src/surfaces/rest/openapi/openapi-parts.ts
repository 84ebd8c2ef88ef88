/**
 * The fixed parts of the REST surface's OpenAPI document (openapi-document.ts): its summary, description and
 * servers, the error responses (which apply to which route, with the error bodies' components) and the security
 * schemes.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import { challengeOf, ERRORS, type ErrorCode, RegistryError } from "../../../domain/errors.js";
import { HEADER_FIELDS } from "../request.js";
import type { RestRoute } from "../route-table.js";
import { FILTER_VALUE_LENGTH, FILTER_VALUES, KEYWORDS_LENGTH, REQUEST_LINE_BUDGET } from "./query-parameters.js";

/** The components of the error bodies, by the contract's names (docs/contract.md, "Errors"). */
export const ERROR = "ERROR_MODEL_REFERENCE";
export const VALIDATION_ERROR = "VALIDATION_ERROR_MODEL_REFERENCE";

export const SUMMARY =
  "The REST surface of the agent definition registry: register Agent Definitions (create or update on name + " +
  "provider + version) and read them back.";

export const DESCRIPTION = [
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
export const SERVERS = [
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
export const ERROR_RESPONSES: readonly {
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
export const METHOD_NOT_ALLOWED = validationResponse(
  `\`METHOD_NOT_ALLOWED\`: ${ERRORS.METHOD_NOT_ALLOWED.meaning} \`Allow\` lists the methods it serves.`,
  {
    Allow: { description: "The methods the path serves.", required: true, schema: { type: "string" } },
  },
);

export const SECURITY_SCHEMES = {
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
