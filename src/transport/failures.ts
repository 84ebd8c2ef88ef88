import { asRegistryError, isServerSide, RegistryError } from "../domain/errors.js";
import type { Logger } from "../logger.js";
import type { RequestRecord } from "../observability/request-record.js";

/** What is known of the request a failure belongs to. */
export interface FailureContext {
  /** The request's record: its id goes into the error line, and it notes that the failure was logged. */
  readonly record?: RequestRecord | undefined;
  /** The client closed the request before it was answered (read from the connection's state, not the error). */
  readonly clientGone?: boolean | undefined;
}

/**
 * The error a caller sees for `err`, logged with its cause and the request's
 * id when it is the service's fault (5xx): a deliberate RegistryError as it
 * is, anything else INTERNAL, so no stack trace or SQL ever reaches a caller.
 * Every surface reports failures through here.
 *
 * A failure that is only the client going away (its body stopped mid-way) is
 * no fault of the service: nothing is logged, and the access line says 499.
 */
export function callerError(err: unknown, logger: Logger, procedure: string, context: FailureContext = {}): RegistryError {
  const error = asRegistryError(err);
  if (context.clientGone === true && !(err instanceof RegistryError)) return error;
  // A verdict refused at the edge is raised again inside the RPC: its failure was logged the first time.
  if (isServerSide(error) && context.record?.failureLogged !== true) {
    logger.error(err instanceof RegistryError ? "request failed" : "unexpected error", {
      ...(context.record === undefined ? {} : { requestId: context.record.id }),
      procedure,
      code: error.code,
      err,
    });
    if (context.record !== undefined) context.record.failureLogged = true;
  }
  return error;
}
