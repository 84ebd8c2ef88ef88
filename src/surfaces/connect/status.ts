/**
 * A failed Connect unary call as Connect answers it: the HTTP status of its
 * code, its metadata as headers, and Connect's JSON error body
 * (codeToHttpStatus, errorToJsonBytes), whatever the request's codec.
 */
import type { ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";

/** The content type of every Connect error. */
export const ERROR_CONTENT_TYPE = "application/json";

/** Sets `error`'s headers in `headers` and answers its status and body. */
export function connectErrorAnswer(
  error: ConnectError,
  headers: Record<string, string>,
): { status: number; body: Uint8Array } {
  headers["content-type"] = ERROR_CONTENT_TYPE;
  error.metadata.forEach((value, name) => {
    headers[name] = value;
  });
  return { status: codeToHttpStatus(error.code), body: errorToJsonBytes(error, {}) };
}
