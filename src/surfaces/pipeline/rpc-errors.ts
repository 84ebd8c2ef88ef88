/**
 * The registry's errors on the RPC surfaces: a RegistryError becomes the
 * ConnectError of its row in ERRORS, with the same body as REST answers
 * (src/domain/errors.ts) as its error detail.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { ErrorSchema, ValidationErrorSchema } from "../../../gen/asor/v1/error_pb.js";
import { challengeOf, errorBody, RegistryError } from "../../domain/errors.js";
import type { Logger } from "../../logger.js";
import { type RequestRecord, recordOf } from "../../observability/request-record.js";
import { callerError } from "./failures.js";

/** `err` as a ConnectError whose detail carries the same content as the REST body. */
export function toConnectError(err: RegistryError): ConnectError {
  const body = errorBody(err);
  const detail =
    "errors" in body
      ? {
          desc: ValidationErrorSchema,
          value: create(ValidationErrorSchema, { error: body.error, errors: [...body.errors] }),
        }
      : { desc: ErrorSchema, value: create(ErrorSchema, body) };
  const challenge = challengeOf(err);
  const retryAfter = err.row.retryAfterSeconds;
  const metadata = {
    ...(challenge === undefined ? {} : { "www-authenticate": challenge }),
    ...(retryAfter === undefined ? {} : { "retry-after": String(retryAfter) }),
  };
  return new ConnectError(
    err.message,
    Code[err.row.grpc],
    Object.keys(metadata).length === 0 ? undefined : metadata,
    [detail],
    err,
  );
}

/**
 * The ConnectError a caller may see for `err`: the registry's own by its row, Connect's own (a deadline, a
 * protocol error) as they are, anything else INTERNAL with the original logged only.
 */
export function callerConnectError(
  err: unknown,
  logger: Logger,
  procedure: string,
  record: RequestRecord | undefined,
): ConnectError {
  if (
    err instanceof ConnectError &&
    !(err.cause instanceof RegistryError) &&
    err.code !== Code.Internal &&
    err.code !== Code.Unknown
  )
    return err;
  return toConnectError(callerError(err, logger, procedure, { record }));
}

/** Turns every error leaving a registry RPC into the ConnectError a caller may see (callerConnectError). */
export function errorInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      throw callerConnectError(err, logger, `${req.service.typeName}/${req.method.name}`, recordOf(req.contextValues));
    }
  };
}
