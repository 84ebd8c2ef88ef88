import { asRegistryError, isServerSide, RegistryError } from "../domain/errors.js";
import type { Logger } from "../logger.js";

/**
 * The error a caller sees for `err`, logged with its cause when it is the
 * service's fault (5xx): a deliberate RegistryError as it is, anything else
 * INTERNAL, so no stack trace or SQL ever reaches a caller. Every surface
 * reports failures through here.
 */
export function callerError(err: unknown, logger: Logger, procedure: string): RegistryError {
  const error = asRegistryError(err);
  if (isServerSide(error)) logger.error(err instanceof RegistryError ? "request failed" : "unexpected error", { procedure, code: error.code, err });
  return error;
}
