/**
 * A failed REST request as REST answers it: the registry's error body with
 * the HTTP status of its row (http-answer.ts errorAnswer), the failure mapped
 * once (callerError) and its RPC code for the access line.
 */
import { Code } from "@connectrpc/connect";
import { errorAnswer } from "../../http/http-answer.js";
import type { Logger } from "../../logger.js";
import type { RequestRecord } from "../../observability/request-record.js";
import { callerError } from "../pipeline/failures.js";
import type { Failed } from "../pipeline/pipeline.js";

/** The refusals of a watch beyond its limits (operations/watch-limits.ts). */
const WATCH_LIMIT_CODES: ReadonlySet<string> = new Set(["TOO_MANY_WATCHES", "WATCHES_FULL"]);

/** What a failed REST request answers, and its code. */
export function restFailure(
  err: unknown,
  call: { readonly record: RequestRecord; clientGone(): boolean; readonly http1: boolean },
  logger: Logger,
): Failed<{ readonly http: ReturnType<typeof errorAnswer> }> {
  const { record } = call;
  const clientGone = call.clientGone();
  const failure = callerError(err, logger, record.rpc ?? "", { record, clientGone });
  // Nobody is left to answer: the access line says 499 and canceled, not the error's code.
  if (clientGone) return { answer: { http: errorAnswer(failure) }, code: Code.Canceled };
  // A watch refused for want of a place closes its HTTP/1.1 connection: a client that opens watches beyond
  // its limits must not keep MAX_CONNECTIONS' places idle, where other tenants' requests would come.
  const closing = call.http1 && WATCH_LIMIT_CODES.has(failure.code);
  return {
    answer: { http: errorAnswer(failure, closing ? { connection: "close" } : {}) },
    code: Code[failure.row.grpc],
  };
}
