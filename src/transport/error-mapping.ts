import { create, type JsonObject, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { ValidationError } from "../../gen/asor/v1/error_pb.js";
import { ErrorSchema, ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { type ErrorKind, RegistryError } from "../domain/errors.js";
import type { Logger } from "../logger.js";

/**
 * The one table from the registry's error kinds to HTTP statuses and gRPC
 * codes. Kinds whose HTTP answer carries the validation error body are marked.
 */
const KINDS: Record<ErrorKind, { status: number; code: Code; validationBody: boolean }> = {
  invalid: { status: 400, code: Code.InvalidArgument, validationBody: true },
  unauthenticated: { status: 401, code: Code.Unauthenticated, validationBody: true },
  forbidden: { status: 403, code: Code.PermissionDenied, validationBody: true },
  not_found: { status: 404, code: Code.NotFound, validationBody: true },
  already_exists: { status: 409, code: Code.AlreadyExists, validationBody: true },
  // A write that kept colliding with concurrent writers: the client may retry.
  conflict: { status: 409, code: Code.Aborted, validationBody: true },
  too_large: { status: 413, code: Code.ResourceExhausted, validationBody: true },
  // Only REST has media types; gRPC and Connect reject them before us.
  unsupported_media_type: { status: 415, code: Code.InvalidArgument, validationBody: true },
  unavailable: { status: 503, code: Code.Unavailable, validationBody: false },
  internal: { status: 500, code: Code.Internal, validationBody: false },
};

/** gRPC codes -> HTTP statuses, for errors that reach REST as ConnectErrors. */
const HTTP_STATUS: Partial<Record<Code, number>> = {
  [Code.InvalidArgument]: 400,
  // A failed precondition is the caller's to fix, as in grpc-gateway.
  [Code.FailedPrecondition]: 400,
  [Code.OutOfRange]: 400,
  [Code.Unauthenticated]: 401,
  [Code.PermissionDenied]: 403,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.Aborted]: 409,
  [Code.ResourceExhausted]: 429,
  [Code.Canceled]: 499,
  [Code.Unimplemented]: 501,
  [Code.Unavailable]: 503,
  [Code.DeadlineExceeded]: 504,
};

export function statusOfKind(kind: ErrorKind): number {
  return KINDS[kind].status;
}

/** The spec's validation error body for a RegistryError. */
export function validationBody(err: RegistryError): ValidationError {
  const errors = err.issues.length > 0 ? err.issues : [{ code: err.code, message: err.message }];
  return create(ValidationErrorSchema, {
    error: err.message,
    errors: errors.map((i) => ({ error: i.message, code: i.code, field: i.field ?? "", path: i.path ?? "" })),
  });
}

/**
 * A RegistryError as a ConnectError whose details carry the same content as
 * the REST body: a ValidationError, or an Error for 5xx kinds.
 */
export function toConnectError(err: RegistryError): ConnectError {
  const mapping = KINDS[err.kind];
  const detail = mapping.validationBody
    ? { desc: ValidationErrorSchema, value: validationBody(err) }
    : { desc: ErrorSchema, value: create(ErrorSchema, { error: err.message, code: err.code }) };
  return new ConnectError(err.message, mapping.code, challengeOf(err), [detail], err);
}

/** RFC 6750 §3: the Bearer challenge of a 401, and of a 403 (insufficient_scope). */
function challengeOf(err: RegistryError): HeadersInit | undefined {
  if (err.kind === "unauthenticated") return { "www-authenticate": 'Bearer realm="asor"' };
  if (err.kind === "forbidden") return { "www-authenticate": 'Bearer realm="asor", error="insufficient_scope"' };
  return undefined;
}

const INTERNAL_MESSAGE = "An internal error occurred; it has been logged.";

/**
 * Any error as the ConnectError a caller may see. Unexpected errors become
 * `internal` with a fixed message: the original goes to the log only, so no
 * stack trace or SQL ever reaches a caller.
 */
export function asConnectError(err: unknown, logger: Logger, procedure: string): ConnectError {
  if (err instanceof RegistryError) {
    if (err.kind === "internal" || err.kind === "unavailable") logger.error("request failed", { procedure, code: err.code, err });
    return toConnectError(err);
  }
  if (err instanceof ConnectError && err.code !== Code.Internal && err.code !== Code.Unknown) return err;
  logger.error("unexpected error", { procedure, err });
  return toConnectError(new RegistryError("internal", "INTERNAL", INTERNAL_MESSAGE));
}

/**
 * The REST answer for a ConnectError: its status, and the body in the spec's
 * shape for that status (the validation error body for 4xx, Error for 5xx).
 */
export function restError(err: ConnectError, status = HTTP_STATUS[err.code] ?? 500): { status: number; body: JsonObject; headers: Record<string, string> } {
  const challenge = err.metadata.get("www-authenticate");
  const headers: Record<string, string> = challenge === null ? {} : { "www-authenticate": challenge };
  return { status, headers, body: restErrorBody(err, status) };
}

function restErrorBody(err: ConnectError, status: number): JsonObject {
  const [validation] = err.findDetails(ValidationErrorSchema);
  if (validation !== undefined) return toJson(ValidationErrorSchema, validation) as JsonObject;
  const [plain] = err.findDetails(ErrorSchema);
  if (plain !== undefined) return toJson(ErrorSchema, plain) as JsonObject;
  // An error raised by the RPC layer itself (a deadline, say) has no details.
  const message = status === 500 ? INTERNAL_MESSAGE : err.rawMessage;
  const code = Code[err.code].replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
  if (status >= 500) return { error: message, code };
  return { error: message, errors: [{ error: message, code }] };
}
