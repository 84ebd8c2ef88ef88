/**
 * The closed set of the registry's error codes, each with its one-line meaning, its HTTP status, its gRPC
 * code and the shape of its body, and the codes of the issues an error may list (errors.ts says how they are
 * answered). Messages may change, codes may not.
 */
import type { Code } from "@connectrpc/connect";

/** A gRPC status code by its name in Connect's `Code` enum (`InvalidArgument`, ...). */
export type GrpcCodeName = keyof typeof Code;

/**
 * The two body shapes of the contract (docs/contract.md, "Errors"): the validation error
 * (`{error, errors: [{error, code, field, path}]}`) for the statuses the spec
 * gives it, the plain error (`{error, code}`) for every other one.
 */
export type BodyShape = "validation" | "error";

/** How one code is answered. */
export interface ErrorRow {
  /** What it means, for the README and the OpenAPI document. */
  readonly meaning: string;
  readonly http: number;
  readonly grpc: GrpcCodeName;
  readonly body: BodyShape;
  /** Seconds a client should wait before it tries again (`Retry-After`), for refusals that pass by themselves. */
  readonly retryAfterSeconds?: number;
}

/**
 * Every code an error as a whole can carry, and how each is answered. A code
 * without a row does not compile.
 */
export const ERRORS = {
  VALIDATION_FAILED: {
    http: 400,
    grpc: "InvalidArgument",
    body: "validation",
    meaning: "The request breaks the contract; `errors` lists every problem.",
  },
  A161: {
    http: 400,
    grpc: "InvalidArgument",
    body: "validation",
    meaning: "A third-party agent selected the host system as its platform.",
  },
  A2849: {
    http: 400,
    grpc: "InvalidArgument",
    body: "validation",
    meaning: "The tenant has no agent id sequence generator; one must be created before agents are registered.",
  },
  A3015: {
    http: 400,
    grpc: "InvalidArgument",
    body: "validation",
    meaning: "The externalAgentID is already used by another agent of the same provider.",
  },
  INVALID_PAGE_TOKEN: {
    http: 400,
    grpc: "InvalidArgument",
    body: "validation",
    meaning: "The pageToken is malformed, was made for another tenant, filter or order, or was sent with offset.",
  },
  KEY_CHANGED: {
    http: 400,
    grpc: "InvalidArgument",
    body: "validation",
    meaning: "An update by id changes the version's name, provider.id or version; a new version is a POST.",
  },
  UNAUTHENTICATED: {
    http: 401,
    grpc: "Unauthenticated",
    body: "validation",
    meaning: "No valid bearer token: missing, malformed, expired, not yet valid, or not from the trusted issuer.",
  },
  PERMISSION_DENIED: {
    http: 403,
    grpc: "PermissionDenied",
    body: "validation",
    meaning: "The token lacks the security domain the operation needs, or is for another tenant.",
  },
  // 403 like PERMISSION_DENIED, with a code of its own: the caller holds the operation's domain, but not for
  // this version's state.
  AGENT_DEACTIVATED: {
    http: 403,
    grpc: "PermissionDenied",
    body: "validation",
    meaning:
      "The write would change a DEACTIVATED version or add a version to an agent whose versions are all " +
      "DEACTIVATED; that needs the security domain Setup: Agents.",
  },
  NOT_FOUND: {
    http: 404,
    grpc: "NotFound",
    body: "validation",
    meaning: "No definition with that id exists in the tenant, or no resource at that path.",
  },
  TENANT_NOT_FOUND: { http: 404, grpc: "NotFound", body: "validation", meaning: "The tenant has not been set up." },
  // Unimplemented is what a gRPC server answers for a method it does not serve.
  METHOD_NOT_ALLOWED: {
    http: 405,
    grpc: "Unimplemented",
    body: "validation",
    meaning: "A REST path was called with a method it does not serve.",
  },
  TENANT_EXISTS: {
    http: 409,
    grpc: "AlreadyExists",
    body: "validation",
    meaning: "A tenant with that name has already been set up.",
  },
  // The version exists (GET by id reads it) but is withdrawn: its card is gone, not missing. gRPC: the state
  // forbids it (AIP-193).
  CARD_DEACTIVATED: {
    http: 410,
    grpc: "FailedPrecondition",
    body: "validation",
    meaning: "The version is DEACTIVATED: its A2A agent card is not served (the definition stays readable by id).",
  },
  // A write that kept colliding with concurrent writers: the client may retry (Aborted, as AIP-193 advises).
  CONFLICT: {
    http: 409,
    grpc: "Aborted",
    body: "validation",
    meaning: "Concurrent writes to the same key kept colliding; retry the request.",
  },
  // AIP-154: a stale etag is FAILED_PRECONDITION; over HTTP it is 412, as If-Match asks (RFC 9110 §13.1.1).
  PRECONDITION_FAILED: {
    http: 412,
    grpc: "FailedPrecondition",
    body: "validation",
    meaning:
      "If-Match (or the request's etag) no longer matches the definition, or If-None-Match: * met an existing one; " +
      "nothing was written.",
  },
  // The client took longer to send its body than the service waits: RFC 9110's 408; over gRPC the stream is
  // cancelled instead.
  REQUEST_TIMEOUT: {
    http: 408,
    grpc: "DeadlineExceeded",
    body: "validation",
    meaning:
      "The request did not arrive whole in time (its headers within HTTP_HEADERS_TIMEOUT_MS, all of it within " +
      "HTTP_REQUEST_TIMEOUT_MS, its body within HTTP_BODY_TIMEOUT_MS of its headers); the connection is closed.",
  },
  // Refused by Node's HTTP/1.1 parser before the request could be read: past --max-http-header-size
  // (16 KiB by default) for the request line and headers, or bytes that are no HTTP request at all.
  // HTTP/1.1 only: HTTP/2 has its own limits, met with a stream reset.
  HEADERS_TOO_LARGE: {
    http: 431,
    grpc: "ResourceExhausted",
    body: "validation",
    meaning:
      "The request line and headers are larger than the server reads (16 KiB by default): shorten the query " +
      "(docs/api.md, OpenAPI).",
  },
  MALFORMED_REQUEST: {
    http: 400,
    grpc: "InvalidArgument",
    body: "validation",
    meaning: "The bytes sent are not an HTTP/1.1 request the server can read; the connection is closed.",
  },
  // 413, not 429: the body is too large, not the caller too fast; gRPC has only ResourceExhausted for both.
  PAYLOAD_TOO_LARGE: {
    http: 413,
    grpc: "ResourceExhausted",
    body: "validation",
    meaning: "The request body is larger than the configured limit.",
  },
  // 415 over HTTP; an RPC cannot have a wrong media type by the time it is decoded, so InvalidArgument.
  UNSUPPORTED_MEDIA_TYPE: {
    http: 415,
    grpc: "InvalidArgument",
    body: "validation",
    meaning: "The request body is neither application/json nor multipart/form-data.",
  },
  // Kubernetes' answer to a watch from a revision its log no longer holds: 410 Gone over HTTP; over gRPC the
  // request cannot succeed until the client lists again, FAILED_PRECONDITION (AIP-193).
  REVISION_COMPACTED: {
    http: 410,
    grpc: "FailedPrecondition",
    body: "validation",
    meaning:
      "The watch's `since` (or Last-Event-ID) is older than the change log keeps (WATCH_RETENTION_*); the message " +
      "names the oldest revision held: list again and watch from the list's `revision`.",
  },
  // Sent after the stream began (an SSE `error` event, a gRPC status): the watcher resumes from its last event.
  WATCH_TOO_SLOW: {
    http: 429,
    grpc: "ResourceExhausted",
    body: "validation",
    meaning:
      "A watcher fell more than WATCH_QUEUE_LIMIT events or WATCH_QUEUE_MAX_BYTES bytes behind and was closed; " +
      "resume from the last revision it received.",
  },
  // A start from an old revision waits for its share of what all replays may hold (WATCH_REPLAY_MAX_BYTES); one
  // that waits too long is refused, and passes by itself: 503 with a Retry-After, RESOURCE_EXHAUSTED over gRPC.
  WATCH_REPLAY_BUSY: {
    http: 503,
    grpc: "ResourceExhausted",
    body: "error",
    meaning:
      "Watches starting from an older revision hold as many bytes of the change log as the service allows " +
      "(WATCH_REPLAY_MAX_BYTES); retry shortly.",
    retryAfterSeconds: 1,
  },
  // Refused before the stream began (issue 50, item 2): the caller's own watches, or its tenant's, hold the places;
  // 429 as a rate limit is, for the caller or its tenant to free them.
  TOO_MANY_WATCHES: {
    http: 429,
    grpc: "ResourceExhausted",
    body: "validation",
    meaning:
      "The caller (WATCH_MAX_PER_TOKEN) or its tenant (WATCH_MAX_PER_TENANT, WATCH_MAX_HTTP1_PER_TENANT over " +
      "HTTP/1.1) has as many watches open as it may; close one, or watch again later.",
  },
  // The process's allowance, not the caller's doing: 503 with a Retry-After over HTTP, as OVERLOADED; over gRPC
  // the place a watch needs is what is missing (RESOURCE_EXHAUSTED).
  WATCHES_FULL: {
    http: 503,
    grpc: "ResourceExhausted",
    body: "error",
    meaning:
      "The service has as many watches open as it may (WATCH_MAX_OPEN); retry after Retry-After seconds, or on " +
      "another replica.",
    retryAfterSeconds: 5,
  },
  INTERNAL: { http: 500, grpc: "Internal", body: "error", meaning: "An unexpected error; it has been logged." },
  // The host app's setup, not the caller's request, is at fault (a 5xx), but nothing is hidden: the answer says
  // what to change, since whoever sees it first is often the one who mounted the registry.
  BODY_ALREADY_READ: {
    http: 500,
    grpc: "Internal",
    body: "error",
    meaning:
      "Inside an express app, a middleware read the request body before the registry could (a body parser " +
      "such as express.json() mounted before it): mount the registry before body parsers.",
  },
  UNAVAILABLE: {
    http: 503,
    grpc: "Unavailable",
    body: "error",
    meaning: "A dependency (the database, or the token issuer) is unreachable; retry later.",
  },
  // Not the caller's fault, and over in a moment: as a dependency that is down, Unavailable, with a Retry-After.
  OVERLOADED: {
    http: 503,
    grpc: "Unavailable",
    body: "error",
    meaning: "The service holds as many request bodies in memory as it may (MAX_BUFFERED_BODY_BYTES); retry shortly.",
    retryAfterSeconds: 1,
  },
  OUTCOME_UNKNOWN: {
    http: 503,
    grpc: "Unavailable",
    body: "error",
    meaning:
      "The database became unreachable while committing the write, so it may or may not have been saved; retry " +
      "(the upsert is idempotent).",
  },
} as const satisfies Record<string, ErrorRow>;

/** The code of an error as a whole: the closed set of ERRORS. */
export type ErrorCode = keyof typeof ERRORS;

/** Codes that only name one problem inside `errors` (never an error as a whole), with their meanings. */
export const ISSUE_CODES = {
  MALFORMED_JSON: "The body is not valid JSON.",
  DUPLICATE_KEY: "A JSON object has the same member twice.",
  MALFORMED_PROTOBUF:
    "The protobuf binary message cannot be decoded (broken wire format, or a string that is not valid UTF-8).",
  TOO_DEEP: "The JSON nests objects and arrays deeper than the limit.",
  UNKNOWN_FIELD: "The member is not part of the contract.",
  INVALID_TYPE: "The member has the wrong JSON type.",
  REQUIRED: "The member is required and missing or empty.",
  TOO_LONG: "The string is longer than the member allows.",
  TOO_MANY: "The array has more items than the member allows.",
  TOO_MANY_TERMS:
    "The definition has more distinct search terms (words and filter values) than one definition may have " +
    "(MAX_TERMS_PER_DEFINITION).",
  INVALID_UNICODE: "The string is not well-formed Unicode (it has an unpaired surrogate).",
  INVALID_CHARACTER:
    "A name or identifier holds a control, bidirectional formatting, zero-width or line separator character, or " +
    "begins or ends with white space.",
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
  DUPLICATE_KID: "Two keys of one set have the same kid.",
  KID_REVOKED: "The kid names a key of the provider that was revoked; a revoked kid cannot be set again.",
  KID_TAKEN: "The kid names another key the provider holds; a different key needs a new kid.",
  MALFORMED_KEY: "The JWK cannot be imported as the public key its members describe.",
  MALFORMED_MULTIPART: "The body is not valid multipart/form-data.",
  REPEATED_HEADER: "A header the request may carry once (Authorization) came more than once.",
  MALFORMED_COMPRESSION: "The compressed message cannot be decompressed with the encoding it names.",
  MORE_ISSUES:
    "The request has more problems than one answer lists (100 items at most); this last item says how many were " +
    "left out.",
} as const satisfies Record<string, string>;

/** The code of one problem in `errors`: an issue code, or a whole-request code repeated for its one item. */
export type IssueCode = ErrorCode | keyof typeof ISSUE_CODES;

/** Every code a client can meet, with its meaning: what the README documents. */
export function allCodes(): Record<IssueCode, string> {
  const whole = Object.fromEntries(Object.entries(ERRORS).map(([code, row]) => [code, row.meaning])) as Record<
    ErrorCode,
    string
  >;
  return { ...whole, ...ISSUE_CODES };
}
