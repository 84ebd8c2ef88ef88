import type { DescField, JsonObject } from "@bufbuild/protobuf";

/**
 * What the OpenAPI document says of REST query parameters beyond their proto rules: the forms the
 * service parses itself (src/domain/list-query.ts), and the limits under which a query fits in a
 * request line (below). Keyed by the field's full name; each entry is merged into the parameter's
 * schema, or into its items' schema for a repeated field (`items`).
 */
interface Refinement {
  readonly schema?: JsonObject;
  readonly items?: JsonObject;
  /** Keywords of the proto schema the refinement makes redundant. */
  readonly drop?: readonly string[];
}

/**
 * Node answers a request whose request line and headers pass 16 KiB with a bare 431
 * (`--max-http-header-size`, http.maxHeaderSize: 16,384 bytes, the request line included). The
 * document keeps the request line of any query it allows within REQUEST_LINE_BUDGET, and leaves
 * the rest to the headers (Authorization, If-Match, ...). The worst case of a string is a character
 * outside the BMP sent percent-encoded: 12 bytes a character.
 *
 * A list request at its longest (gen/openapi.json, test/surfaces/openapi.test.ts counts it):
 * the path and `tenant` 108 bytes, `limit`, `offset`, `latest`, four `status` 117,
 * `updatedSince` 57, `orderBy` 25, `pageToken` 4,107 (a token ordered by name carries the name),
 * `q` 3 + 12 × 90, two values of each of the nine exact filters: 2 × (91 + 9 × 12 × 30) = 6,662,
 * and the three values of `liveness` and of `drift` (issue 44) 111; 12,270 bytes in all, under 12 KiB
 * (`q` went from 100 characters to 90 to make room for the last two).
 *
 * The service itself takes more of each (20 values of up to 255 characters a filter, `q` up to
 * 500), as gRPC and Connect do: over REST a longer query works while its request fits.
 */
export const REQUEST_LINE_BUDGET = 12 * 1024;
/** The values of one exact filter the document allows a REST query, and their length. */
export const FILTER_VALUES = 2;
export const FILTER_VALUE_LENGTH = 30;
export const KEYWORDS_LENGTH = 90;

/** `orderBy`: a key of the list's order, optionally followed by ` desc`, or `relevance` (with `q`; list-query.ts). */
export const ORDER_BY = [
  "createdAt",
  "createdAt desc",
  "updatedAt",
  "updatedAt desc",
  "name",
  "name desc",
  "relevance",
];

/** `updatedSince`: an RFC 3339 date-time as list-query.ts reads it (fractions of a second: 1 to 9 digits). */
const RFC3339 = "^\\d{4}-\\d{2}-\\d{2}[Tt]\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?([Zz]|[+-]\\d{2}:\\d{2})$";

const filter: Refinement = { schema: { maxItems: FILTER_VALUES }, items: { maxLength: FILTER_VALUE_LENGTH } };
const pageToken: Refinement = { schema: { pattern: "^[A-Za-z0-9_-]*$" } };
const LIST = "asor.v1.ListAgentDefinitionsRequest";
const WATCH = "asor.v1.WatchAgentDefinitionsRequest";

const REFINEMENTS: Readonly<Record<string, Refinement>> = {
  ...Object.fromEntries(
    [
      "name",
      "provider",
      "platform",
      "version",
      "tag",
      "skill_id",
      "execution_mode",
      "resource",
      "external_agent_id",
    ].flatMap((name) => [
      [`${LIST}.${name}`, filter],
      [`${WATCH}.${name}`, filter],
    ]),
  ),
  // A revision: digits, as rest/request.ts reads them (at most 15, a safe integer's).
  [`${WATCH}.since`]: { schema: { pattern: "^[0-9]{1,15}$" } },
  [`${LIST}.q`]: { schema: { maxLength: KEYWORDS_LENGTH } },
  [`${LIST}.order_by`]: { schema: { enum: ORDER_BY }, drop: ["maxLength"] },
  // 35: the longest form the pattern takes (nine digits of a second, an offset).
  [`${LIST}.updated_since`]: { schema: { format: "date-time", pattern: RFC3339, maxLength: 35 } },
  // A token is base64url (list-query.ts refuses any other character).
  [`${LIST}.page_token`]: pageToken,
  "asor.v1.ListAgentDefinitionVersionsRequest.page_token": pageToken,
};

/** The schema of a query parameter of `field`: its proto schema with what the document adds for REST. */
export function refineQuerySchema(field: DescField, schema: JsonObject): JsonObject {
  const refinement = REFINEMENTS[`${field.parent.typeName}.${field.name}`];
  if (refinement === undefined) return schema;
  const out: JsonObject = { ...schema, ...refinement.schema };
  for (const keyword of refinement.drop ?? []) delete out[keyword];
  if (refinement.items !== undefined) out.items = { ...(out.items as JsonObject), ...refinement.items };
  return out;
}
