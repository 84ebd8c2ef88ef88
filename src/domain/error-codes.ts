/**
 * Every code the registry answers with, with its one-line meaning. Clients
 * branch on these; the list is documented in docs/errors.md and may grow but
 * a code never changes meaning.
 */
export const ERROR_CODES = {
  // Whole-request codes (the `code` of the error as a whole).
  VALIDATION_FAILED: "The request breaks the contract; `errors` lists every problem.",
  NOT_FOUND: "No definition with that id exists in the tenant.",
  TENANT_NOT_FOUND: "The tenant has not been set up.",
  UNSUPPORTED_MEDIA_TYPE: "The request body is neither application/json nor multipart/form-data.",
  PAYLOAD_TOO_LARGE: "The request body is larger than the configured limit.",
  CONFLICT: "Concurrent writes to the same key kept colliding; retry the request.",
  UNAUTHENTICATED: "No valid bearer token: missing, malformed, expired, not yet valid, or not from the trusted issuer.",
  PERMISSION_DENIED: "The token lacks the security domain the operation needs, or is for another tenant.",
  UNAVAILABLE: "A dependency (the database, or the token issuer) is unreachable; retry later.",
  OUTCOME_UNKNOWN: "The database became unreachable while committing the write, so it may or may not have been saved; retry (the upsert is idempotent).",
  INTERNAL: "An unexpected error; it has been logged.",
  TENANT_EXISTS: "A tenant with that name has already been set up.",
  METHOD_NOT_ALLOWED: "A REST path was called with a method it does not serve.",
  // The spec's codes (SPEC.md §7.3).
  A161: "A third-party agent selected the host system as its platform.",
  A2849: "The tenant has no agent id sequence generator; one must be created before agents are registered.",
  A3015: "The externalAgentID is already used by another agent of the same provider.",
  // Per-member codes (the `code` of each item in `errors`).
  MALFORMED_JSON: "The body is not valid JSON.",
  DUPLICATE_KEY: "A JSON object has the same member twice.",
  MALFORMED_PROTOBUF: "The protobuf binary message cannot be decoded (broken wire format, or a string that is not valid UTF-8).",
  TOO_DEEP: "The JSON nests objects and arrays deeper than the limit.",
  UNKNOWN_FIELD: "The member is not part of the contract.",
  INVALID_TYPE: "The member has the wrong JSON type.",
  REQUIRED: "The member is required and missing or empty.",
  TOO_LONG: "The string is longer than the member allows.",
  TOO_MANY: "The array has more items than the member allows.",
  INVALID_UNICODE: "The string is not well-formed Unicode (it has an unpaired surrogate).",
  PATTERN_MISMATCH: "The string does not have the member's required form.",
  INVALID_URI: "The string is not an absolute URI.",
  NOT_ALLOWED: "The value is not one of the member's allowed values.",
  OUT_OF_RANGE: "The number is outside the member's range.",
  INVALID_VALUE: "The value breaks a rule of the member.",
  DUPLICATE_SKILL_ID: "Two skills of one definition have the same id.",
  DUPLICATE_SKILL_RESOURCE: "Two hostConfig items name the same skill.",
  UNKNOWN_SKILL: "A hostConfig item names a skill the definition does not have.",
  UNKNOWN_AGENT: "The id of a definition names no version and no agent in the tenant.",
  AGENT_MISMATCH: "The id names another agent than the one the key's instance belongs to.",
  MALFORMED_MULTIPART: "The body is not valid multipart/form-data.",
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;
