/**
 * The registry's errors, in one module: the closed set of codes, each with its
 * one-line meaning, its HTTP status, its gRPC code and the shape of its body;
 * the error class every deliberate failure is thrown as; and the body that
 * every surface answers with. Messages may change, codes may not.
 *
 * Every endpoint (REST, the RPCs, probes, metrics, OpenAPI, each runtime's
 * edge) and the OpenAPI generator read ERRORS; no error body is built
 * anywhere else.
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

/** One problem with one member of the request. */
export interface Issue {
  /** Stable code, e.g. `REQUIRED`, `A3015`. */
  readonly code: IssueCode;
  /** What is wrong, for humans. */
  readonly message: string;
  /** The member's name (its JSON name), e.g. `tag`. */
  readonly field?: string;
  /** The member's JSON path, e.g. `skills[0].tags[1].tag`. */
  readonly path?: string;
  /**
   * Only on the MORE_ISSUES item that ends a capped list: how many problems
   * it stands for, and whether that is a lower bound (checking stopped early).
   */
  readonly omitted?: { readonly count: number; readonly atLeast: boolean };
}

/**
 * The most items an error's `errors` lists. A broken body can hold hundreds
 * of thousands of problems (a 1 MB body of one key repeated); past this many
 * only a count is kept, so building, holding and answering them stays small.
 */
export const MAX_ISSUES = 100;

/** The most characters of an issue's message, path or field; longer ones are cut (they quote the client's input). */
const MAX_ISSUE_TEXT = 256;

/**
 * The most UTF-8 bytes the listed issues take together, so every error answer stays small (Connect sends them
 * twice, binary and JSON).
 */
const MAX_ISSUE_BYTES = 16 * 1024;

/** The UTF-8 length of `text`, without encoding it (a surrogate pair counts 6, a little over its 4). */
function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
  }
  return bytes;
}

function cut(text: string): string {
  if (text.length <= MAX_ISSUE_TEXT) return text;
  // Never between the two halves of a surrogate pair: half a character is not Unicode.
  const end = /[\ud800-\udbff]/.test(text.charAt(MAX_ISSUE_TEXT - 4)) ? MAX_ISSUE_TEXT - 4 : MAX_ISSUE_TEXT - 3;
  return `${text.slice(0, end)}...`;
}

/**
 * Where every path collects its issues: it keeps up to MAX_ISSUES (within
 * MAX_ISSUE_BYTES) and only counts the rest; an issue given as a function is
 * built only when it is kept, so checking on past the cap stays cheap. A MORE_ISSUES item added (a list
 * capped elsewhere) adds its count. The one place issues are capped: a list a
 * collector made is not capped again, and RegistryError runs any other list
 * through one (capIssues).
 */
export interface IssueCollector {
  /** How many problems were added, kept or not (a lower bound once checking stopped early). */
  readonly count: number;
  /** Adds an issue; give a function to build it only when it is kept. */
  add(issue: Issue | (() => Issue)): void;
  addAll(issues: Iterable<Issue>): IssueCollector;
  /** Says that checking stopped early: more problems may exist than were counted. */
  stoppedEarly(): void;
  /**
   * The kept issues; when any were left out, the last gives way to a MORE_ISSUES item, so never more than
   * MAX_ISSUES.
   */
  issues(): readonly Issue[];
}

/** A new, empty IssueCollector: one per list of issues (a body, a message, a check). */
export function createIssueCollector(): IssueCollector {
  return new Collector();
}

/**
 * The IssueCollector: a class, its methods shared (every request makes a few, nearly all of which find
 * nothing; an object literal of closures and a getter was made anew for each).
 */
class Collector implements IssueCollector {
  #kept: Issue[] = [];
  #bytes = 0;
  #omitted = 0;
  #atLeast = false;

  get count(): number {
    return this.#kept.length + this.#omitted;
  }
  add(issue: Issue | (() => Issue)): void {
    if (typeof issue !== "function" && issue.omitted !== undefined) {
      this.#omitted += issue.omitted.count;
      this.#atLeast ||= issue.omitted.atLeast;
      return;
    }
    if (this.#kept.length >= MAX_ISSUES || this.#bytes >= MAX_ISSUE_BYTES) {
      this.#omitted++;
      return;
    }
    const made = typeof issue === "function" ? issue() : issue;
    const item: Issue = {
      code: made.code,
      message: cut(made.message),
      ...(made.field === undefined ? {} : { field: cut(made.field) }),
      ...(made.path === undefined ? {} : { path: cut(made.path) }),
    };
    this.#kept.push(item);
    this.#bytes += utf8Length(item.message) + utf8Length(item.field ?? "") + utf8Length(item.path ?? "") + 64;
  }
  addAll(issues: Iterable<Issue>): IssueCollector {
    for (const issue of issues) this.add(issue);
    return this;
  }
  stoppedEarly(): void {
    this.#atLeast = true;
  }
  issues(): readonly Issue[] {
    // Nothing found, the common case: one shared list, so a check that finds nothing leaves nothing behind.
    if (this.#kept.length === 0 && this.#omitted === 0 && !this.#atLeast) return NO_ISSUES;
    // Frozen: a list capped once stays as it was capped.
    const made = Object.freeze(this.#collected());
    capped.add(made);
    return made;
  }
  #collected(): Issue[] {
    const kept = this.#kept;
    const omitted = this.#omitted;
    const atLeast = this.#atLeast;
    if (omitted === 0 && !atLeast) return [...kept];
    const listed = kept.slice(0, MAX_ISSUES - 1);
    const count = omitted + kept.length - listed.length;
    const leftOut = count === 0 ? "more problems may exist" : `at least ${count} more problems were left out`;
    const message = atLeast
      ? `Checking stopped early: ${leftOut}; fix the ones listed and send the request again.`
      : `${count} more ${count === 1 ? "problem was" : "problems were"} left out; ` +
        "fix the ones listed and send the request again.";
    return [...listed, { code: "MORE_ISSUES", message, omitted: { count, atLeast } }];
  }
}

/** The lists collectors made: capped already. */
const capped = new WeakSet<readonly Issue[]>();

/** What a collector that found nothing answers: one frozen list for all of them. */
export const NO_ISSUES: readonly Issue[] = Object.freeze([]);
capped.add(NO_ISSUES);

/** How many problems `issues` stands for: its items, a MORE_ISSUES item counted as the problems it left out. */
export function problemCount(issues: readonly Issue[]): number {
  return issues.reduce((n, i) => n + (i.omitted === undefined ? 1 : i.omitted.count), 0);
}

/**
 * The one summary of a list of problems, whoever found them (a body's JSON, the
 * contract's rules, the service's): the problem itself when there is one,
 * else "The request has N problems.", N counting the problems left out too.
 */
export function problemsMessage(issues: readonly Issue[]): string {
  const [only] = issues;
  if (issues.length === 1 && only !== undefined && only.omitted === undefined) return only.message;
  return `The request has ${problemCount(issues)} problems.`;
}

/** `issues` capped as IssueCollector caps them: as they are when a collector made them. */
export function capIssues(issues: readonly Issue[]): readonly Issue[] {
  return issues.length === 0 || capped.has(issues) ? issues : createIssueCollector().addAll(issues).issues();
}

/**
 * An error the registry answers with on purpose. `issues` lists every
 * individual problem; `code` is the code of the error as a whole and decides
 * how it is answered (ERRORS).
 */
export class RegistryError extends Error {
  override readonly name = "RegistryError";
  /** At most MAX_ISSUES, however many were given (capIssues). */
  readonly issues: readonly Issue[];
  /**
   * A refusal by design (a rate limit, a full gate, a time limit, an issuer
   * that cannot be asked, a drain): a 5xx that is the service working as
   * intended, logged at `warn` and counted per interval, not as an error.
   */
  readonly designed: boolean;
  constructor(
    readonly code: ErrorCode,
    message: string,
    issues: readonly Issue[] = [],
    options?: { cause?: unknown; designed?: boolean },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.issues = capIssues(issues);
    this.designed = options?.designed === true;
  }

  /** How this error is answered. */
  get row(): ErrorRow {
    return ERRORS[this.code];
  }
}

/** The message a caller sees for anything unexpected; the error itself goes to the log only. */
export const INTERNAL_MESSAGE = "An internal error occurred; it has been logged.";

/**
 * The error a caller sees for `err`: itself when deliberate, else INTERNAL (the original stays as its cause,
 * for the log).
 */
export function asRegistryError(err: unknown): RegistryError {
  return err instanceof RegistryError ? err : new RegistryError("INTERNAL", INTERNAL_MESSAGE, [], { cause: err });
}

/** Whether an error is the registry's fault or its dependencies', and so belongs in the error log. */
export function isServerSide(err: RegistryError): boolean {
  return err.row.http >= 500;
}

/** One item of a validation error body. */
export interface ErrorBodyItem {
  readonly error: string;
  readonly code: string;
  readonly field?: string;
  readonly path?: string;
}

/** The body of an error answer, in the shape its code says (docs/contract.md, "Errors"). */
export type ErrorBody =
  | { readonly error: string; readonly errors: readonly ErrorBodyItem[] }
  | { readonly error: string; readonly code: string };

/** The body every surface answers `err` with: REST as JSON, the RPCs as the error detail. */
export function errorBody(err: RegistryError): ErrorBody {
  if (err.row.body === "error") return { error: err.message, code: err.code };
  const issues = err.issues.length > 0 ? err.issues : [{ code: err.code, message: err.message }];
  return {
    error: err.message,
    errors: issues.map((i) => ({
      error: i.message,
      code: i.code,
      ...(i.field ? { field: i.field } : {}),
      ...(i.path ? { path: i.path } : {}),
    })),
  };
}

/** RFC 6750 §3: the Bearer challenge of a 401, and of a 403 (insufficient_scope); undefined for other errors. */
export function challengeOf(err: RegistryError): string | undefined {
  if (err.code === "UNAUTHENTICATED") return 'Bearer realm="asor"';
  if (err.code === "PERMISSION_DENIED" || err.code === "AGENT_DEACTIVATED")
    return 'Bearer realm="asor", error="insufficient_scope"';
  return undefined;
}

// ---- the errors raised in more than one place ----

/** The request is invalid; every issue is listed, and the message sums them up (problemsMessage) unless given. */
export function invalid(issues: readonly Issue[], message = problemsMessage(issues)): RegistryError {
  return new RegistryError("VALIDATION_FAILED", message, issues);
}

/** The path of the member `name` inside the one at `at` (`""`: the request or body itself), as issues give it. */
export function memberPath(at: string, name: string): string {
  return at === "" ? name : `${at}.${name}`;
}

/** Builds an issue for the member at `path` (a JSON path): its field is the last name in the path. */
export function issueAt(path: string, code: IssueCode, message: string): Issue {
  const names = path.match(/[A-Za-z_][A-Za-z0-9_]*/g);
  const field = names?.at(-1);
  return field === undefined ? { code, message } : { code, message, field, path };
}

export function notFound(what: string, path?: string): RegistryError {
  const issue: Issue =
    path === undefined
      ? { code: "NOT_FOUND", message: `${what} was not found.` }
      : issueAt(path, "NOT_FOUND", `${what} was not found.`);
  return new RegistryError("NOT_FOUND", `${what} was not found.`, [issue]);
}

/** No resource at a path (REST, or a plain HTTP endpoint). */
export function noResourceAt(pathname: string): RegistryError {
  return new RegistryError("NOT_FOUND", `No resource at ${pathname}.`);
}

/** A path served, but not with this method; `allowed` goes into the `Allow` header. */
export function methodNotAllowed(method: string, allowed: readonly string[]): RegistryError {
  return new RegistryError("METHOD_NOT_ALLOWED", `${method} is not allowed here; use ${allowed.join(" or ")}.`);
}

export function tenantNotFound(tenant: string): RegistryError {
  const message = `Tenant "${tenant}" does not exist.`;
  return new RegistryError("TENANT_NOT_FOUND", message, [
    { code: "TENANT_NOT_FOUND", message, field: "tenant", path: "tenant" },
  ]);
}

export function tenantExists(tenant: string, cause?: unknown): RegistryError {
  const message = `Tenant "${tenant}" already exists.`;
  return new RegistryError(
    "TENANT_EXISTS",
    message,
    [{ code: "TENANT_EXISTS", message, field: "name", path: "name" }],
    { cause },
  );
}

/**
 * 400: the request carries `header` (its usual spelling: `Authorization`) more than once. Node keeps only the
 * first of some headers, so which of them would count would depend on who reads it: the request is refused.
 */
export function repeatedHeader(header: string): RegistryError {
  const message = `The request has the header ${header} more than once; send it once.`;
  return invalid([{ code: "REPEATED_HEADER", message, field: header, path: header }], message);
}

/** 401: the request carries no usable credentials; `message` says what is wrong with them. */
export function unauthenticated(message: string): RegistryError {
  return new RegistryError("UNAUTHENTICATED", message);
}

/** 403: the caller is known but may not do this. */
export function forbidden(message: string): RegistryError {
  return new RegistryError("PERMISSION_DENIED", message);
}

/**
 * 500 BODY_ALREADY_READ: inside a host app (express), a middleware mounted before the registry read the body of
 * `request` (method and path), so the registry cannot check it.
 */
export function bodyAlreadyRead(request: string): RegistryError {
  return new RegistryError(
    "BODY_ALREADY_READ",
    `A middleware of the host app read the body of ${request} before the registry could: mount the registry ` +
      "before body parsers (express.json(), express.urlencoded(), ...), or give those only the host's own routes.",
  );
}

/** A body over `limit` bytes. */
/** 431: the request line and headers are past what the HTTP parser reads. */
export function headersTooLarge(): RegistryError {
  const message =
    "The request line and headers are too large for the server to read; shorten the query (each list filter's " +
    "values, q).";
  return new RegistryError("HEADERS_TOO_LARGE", message, [{ code: "HEADERS_TOO_LARGE", message }]);
}

/** 400: what arrived is not an HTTP/1.1 request the parser can read. */
export function malformedRequest(): RegistryError {
  const message = "The bytes sent are not an HTTP/1.1 request the server can read.";
  return new RegistryError("MALFORMED_REQUEST", message, [{ code: "MALFORMED_REQUEST", message }]);
}

export function tooLarge(limit: number): RegistryError {
  return new RegistryError("PAYLOAD_TOO_LARGE", `The request body is larger than ${limit} bytes.`);
}

/** 503: reading this body would take the bytes all requests hold past `limit` (MAX_BUFFERED_BODY_BYTES). */
export function overloaded(limit: number): RegistryError {
  // By design (the budget doing its work): logged at warn, aggregated, like the other refusals.
  return new RegistryError(
    "OVERLOADED",
    `The service is holding as many request bodies as it may (${limit} bytes); retry shortly.`,
    [],
    { designed: true },
  );
}

/** 408: the body did not arrive in time. */
/** 408: Node's parser did not get the request's headers, or all of it, within its timeouts. */
export function requestTimedOut(): RegistryError {
  const message =
    "The request did not arrive whole in time (HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS); the connection " +
    "is closed.";
  return new RegistryError("REQUEST_TIMEOUT", message, [{ code: "REQUEST_TIMEOUT", message }]);
}

export function bodyTimedOut(timeoutMs: number): RegistryError {
  return new RegistryError(
    "REQUEST_TIMEOUT",
    `The request body did not arrive whole within ${timeoutMs} ms of its headers.`,
  );
}

/** The database could not be reached or did not answer in time. */
export function unavailable(
  cause: unknown,
  message = "The registry's database is unavailable; try again later.",
): RegistryError {
  return new RegistryError("UNAVAILABLE", message, [], { cause });
}

/**
 * 503 UNAVAILABLE by design: the service refuses work it was set up to
 * refuse (a rate limit, a full gate, a time limit, an issuer it cannot ask),
 * so the caller retries later. Logged at `warn`, aggregated (RegistryError.designed).
 */
export function refusal(message: string, cause?: unknown): RegistryError {
  return new RegistryError("UNAVAILABLE", message, [], { cause, designed: true });
}

/** What a draining server answers a new request with. */
export function shuttingDown(): RegistryError {
  return refusal("The service is shutting down; retry on another instance.");
}

/**
 * 409 CONFLICT: a write kept losing to other writes until its retries ran out, and was rolled back: nothing
 * was saved. `same key`: every attempt met a write of the same key, agent or externalAgentID (a duplicate
 * key); `busy tenant`: other writes to the tenant (other agents too: new agents wait on the tenant's
 * sequence) kept aborting it, by deadlock, lock wait or lost certification on a Galera cluster, until the
 * write's deadline (DATABASE_TIMEOUT_MS).
 */
export function writeConflict(cause: unknown, reason: "same key" | "busy tenant"): RegistryError {
  const message =
    reason === "same key"
      ? "The definition could not be saved: other requests kept saving the same key, agent or externalAgentID " +
        "at the same time. Nothing was saved; try again."
      : "The definition could not be saved: the tenant was busy with other writes, which kept colliding with " +
        "this one until its time ran out. Nothing was saved; try again.";
  return new RegistryError("CONFLICT", message, [], { cause });
}

/**
 * The database became unreachable after the write's work was done, while its
 * COMMIT was on the way: it may or may not have been committed. The upsert is
 * idempotent, so the caller can simply send it again.
 */
export function outcomeUnknown(cause: unknown): RegistryError {
  const message =
    "The registry's database became unavailable while saving the definition; it may or may not have been saved. " +
    "Send it again.";
  return new RegistryError("OUTCOME_UNKNOWN", message, [], { cause });
}

/**
 * 403 AGENT_DEACTIVATED: `what` (a deactivated version, or a new version of a deactivated agent) needs Setup:
 * Agents.
 */
export function deactivatedWrite(what: string): RegistryError {
  const message =
    `${what} is DEACTIVATED; only a caller with the security domain "Setup: Agents" may write to it ` +
    `(reactivate it with PATCH .../status).`;
  return new RegistryError("AGENT_DEACTIVATED", message);
}

/** 410 CARD_DEACTIVATED: the version `id` is DEACTIVATED, so its agent card is not served. */
export function cardDeactivated(id: string): RegistryError {
  const message =
    `Agent definition ${id} is DEACTIVATED: its agent card is not served. GET the definition by id ` +
    `to read it, or reactivate it.`;
  return new RegistryError("CARD_DEACTIVATED", message, [
    { code: "CARD_DEACTIVATED", message, field: "id", path: "id" },
  ]);
}

/** 412: a conditional write whose condition does not hold; nothing was written. */
export function preconditionFailed(message: string, field: string): RegistryError {
  return new RegistryError("PRECONDITION_FAILED", message, [
    { code: "PRECONDITION_FAILED", message, field, path: field },
  ]);
}

/** A watch from a revision older than the change log holds (issue 20): the client lists again. */
export function revisionCompacted(since: number, oldest: number | undefined, current: number): RegistryError {
  const held =
    oldest === undefined
      ? `it holds no revision now (the tenant is at ${current})`
      : `oldest revision held: ${oldest}; resume from ${oldest - 1} or later`;
  const message =
    `The change log no longer holds the changes after revision ${since}: ${held}. List again and watch from ` +
    "the list's revision.";
  return new RegistryError("REVISION_COMPACTED", message, [
    { code: "REVISION_COMPACTED", field: "since", path: "since", message },
  ]);
}

/**
 * A watcher that fell too far behind (issue 20): closed instead of holding its backlog. `limit` says how far, in the
 * unit that was passed (`1000 events`, `16777216 bytes`).
 */
export function watchTooSlow(limit: string, revision: number): RegistryError {
  return new RegistryError(
    "WATCH_TOO_SLOW",
    `The watcher fell more than ${limit} behind and was closed; resume from the last revision it ` +
      `received (revision ${revision} had been sent to it or filtered out).`,
    [],
    { designed: true },
  );
}

/** A watch from an older revision that could not have its share of WATCH_REPLAY_MAX_BYTES in time (issue 50). */
export function watchReplayBusy(limit: number): RegistryError {
  return new RegistryError(
    "WATCH_REPLAY_BUSY",
    `Watches starting from an older revision hold as many bytes of the change log as the service allows (${limit}); ` +
      "retry shortly.",
    [],
    { designed: true },
  );
}

/** 429: a watch beyond its caller's or its tenant's limit (issue 50, item 2); `message` names the limit. */
export function tooManyWatches(message: string): RegistryError {
  return new RegistryError("TOO_MANY_WATCHES", message, [], { designed: true });
}

/** 503: a watch beyond the process's WATCH_MAX_OPEN (issue 50, item 2). */
export function watchesFull(limit: number): RegistryError {
  return new RegistryError(
    "WATCHES_FULL",
    `The service has as many watches open as it may (${limit}); retry shortly, or on another replica.`,
    [],
    { designed: true },
  );
}
