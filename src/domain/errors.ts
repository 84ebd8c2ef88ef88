/**
 * The registry's errors: a closed set of codes, each with one meaning. The
 * transport layer maps each kind to an HTTP status and a gRPC code (one table,
 * src/transport/error-mapping.ts); messages may change, codes may not.
 */

/** What went wrong, as a category that decides the status of the answer. */
export type ErrorKind =
  | "invalid" // 400: the request breaks the contract
  | "unauthenticated" // 401
  | "forbidden" // 403
  | "not_found" // 404
  | "already_exists" // 409: what the request would create exists
  | "conflict" // 409: could not be applied after retries
  | "too_large" // 413
  | "unsupported_media_type" // 415
  | "unavailable" // 503: a dependency (the database) is unreachable
  | "internal"; // 500: a bug; details go to the log, never to the caller

/** One problem with one member of the request. */
export interface Issue {
  /** Stable code, e.g. `REQUIRED`, `A3015`. */
  readonly code: string;
  /** What is wrong, for humans. */
  readonly message: string;
  /** The member's name (its JSON name), e.g. `tag`. */
  readonly field?: string;
  /** The member's JSON path, e.g. `skills[0].tags[1].tag`. */
  readonly path?: string;
}

/**
 * An error the registry answers with on purpose. `issues` lists every
 * individual problem; `code` is the code of the error as a whole.
 */
export class RegistryError extends Error {
  override readonly name = "RegistryError";
  constructor(
    readonly kind: ErrorKind,
    readonly code: string,
    message: string,
    readonly issues: readonly Issue[] = [],
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The request is invalid; every issue is listed. */
export function invalid(issues: readonly Issue[], message = "The request is invalid."): RegistryError {
  return new RegistryError("invalid", "VALIDATION_FAILED", message, issues);
}

/** Builds an issue for the member at `path` (a JSON path): its field is the last name in the path. */
export function issueAt(path: string, code: string, message: string): Issue {
  const names = path.match(/[A-Za-z_][A-Za-z0-9_]*/g);
  const field = names?.at(-1);
  return field === undefined ? { code, message } : { code, message, field, path };
}

export function notFound(what: string, path?: string): RegistryError {
  const issue: Issue = path === undefined ? { code: "NOT_FOUND", message: `${what} was not found.` } : issueAt(path, "NOT_FOUND", `${what} was not found.`);
  return new RegistryError("not_found", "NOT_FOUND", `${what} was not found.`, [issue]);
}

export function tenantNotFound(tenant: string): RegistryError {
  const message = `Tenant "${tenant}" does not exist.`;
  return new RegistryError("not_found", "TENANT_NOT_FOUND", message, [{ code: "TENANT_NOT_FOUND", message, field: "tenant", path: "tenant" }]);
}

/** The database could not be reached or did not answer in time. */
export function unavailable(cause: unknown): RegistryError {
  return new RegistryError("unavailable", "UNAVAILABLE", "The registry's database is unavailable; try again later.", [], { cause });
}

/**
 * The database became unreachable after the write's work was done, while its
 * COMMIT was on the way: it may or may not have been committed. The upsert is
 * idempotent, so the caller can simply send it again.
 */
export function outcomeUnknown(cause: unknown): RegistryError {
  const message = "The registry's database became unavailable while saving the definition; it may or may not have been saved. Send it again.";
  return new RegistryError("unavailable", "OUTCOME_UNKNOWN", message, [], { cause });
}
