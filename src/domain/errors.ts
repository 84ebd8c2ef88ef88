/**
 * The registry's errors: the error class every deliberate failure is thrown as, the body that every surface
 * answers with, and a constructor for each failure; with the closed set of codes (error-codes.ts) and the
 * issues an invalid request lists (issues.ts), re-exported here. Messages may change, codes may not.
 *
 * Every endpoint (REST, the RPCs, probes, metrics, OpenAPI, each runtime's
 * edge) and the OpenAPI generator read ERRORS; no error body is built
 * anywhere else.
 */
import { ERRORS, type ErrorCode, type ErrorRow, type IssueCode } from "./error-codes.js";
import { capIssues, type Issue, problemsMessage } from "./issues.js";

export type { BodyShape, ErrorCode, ErrorRow, GrpcCodeName, IssueCode } from "./error-codes.js";
export { allCodes, ERRORS, ISSUE_CODES } from "./error-codes.js";
export type { Issue, IssueCollector } from "./issues.js";
export { capIssues, createIssueCollector, MAX_ISSUES, NO_ISSUES, problemCount, problemsMessage } from "./issues.js";

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
