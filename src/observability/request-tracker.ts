import type { Logger } from "../logger.js";
import type { Metrics } from "./metrics.js";
import { createRequestRecord, type Protocol, type RequestRecord } from "./request-record.js";

/** How a request ended, as the runtime's edge saw it. */
export interface RequestOutcome {
  /** The HTTP status sent. */
  readonly status: number;
  /** False when the connection closed before the answer was complete (the client left, or shutdown cut it). */
  readonly completed: boolean;
  /**
   * The RPC code the answer carried, when the edge could read it (gRPC's
   * `grpc-status` trailer): it covers RPCs that failed before the interceptors
   * saw them, such as an unreadable message.
   */
  readonly wireCode?: string | undefined;
}

/**
 * Turns each request into exactly one access log line and one metrics
 * sample. A runtime's edge calls `start` when a request arrives, puts the
 * record in the request's context values, and calls `finish` once when the
 * answer is sent or abandoned. The line and the sample are written when the
 * request's work has settled too (RequestRecord.work), with the duration up to then.
 */
export interface RequestTracker {
  start(init: { method: string; path: string; requestIdHeader: string | null | undefined }): RequestRecord;
  finish(record: RequestRecord, outcome: RequestOutcome): void;
}

const RPC_PROTOCOLS: ReadonlySet<Protocol> = new Set(["grpc", "grpc-web", "connect"]);

/** The RPC codes of a failure of the service itself (what HTTP answers as 500). */
const INTERNAL_CODES: ReadonlySet<string> = new Set(["internal", "unknown", "data_loss"]);

/** nginx's status for a request whose client closed the connection before the answer. */
const CLIENT_CLOSED = 499;

export function createRequestTracker({ logger, metrics }: { logger: Logger; metrics: Metrics }): RequestTracker {
  return {
    start: createRequestRecord,
    finish(record, outcome) {
      const { work } = record;
      if (work === undefined) return report(record, outcome);
      const settled = () => report(record, outcome);
      work.then(settled, settled);
    },
  };

  function report(record: RequestRecord, { status: sent, completed, wireCode }: RequestOutcome): void {
    const durationMs = performance.now() - record.startedAt;
    const protocol = record.protocol ?? "http";
    const isRpc = RPC_PROTOCOLS.has(protocol);
    // An RPC adapter only answers paths of known procedures, so the path names one even when
    // the request failed before the interceptors saw it (an unreadable message).
    const rpc = record.rpc ?? (isRpc ? record.path.replace(/^\//, "") : undefined);
    const status = completed ? sent : CLIENT_CLOSED;
    // Unknown: a Connect or gRPC-Web RPC that failed before the interceptors ran. A client that left
    // got no answer, whatever the work made of it: canceled, on every surface (what Connect wrote after
    // it left, or an "ok" the work noted before the answer could be written, is not the outcome).
    const code = completed ? (record.code ?? wireCode ?? (isRpc ? "unknown" : undefined)) : "canceled";
    logger.info("request", {
      requestId: record.id,
      protocol,
      method: record.method,
      ...(isRpc ? {} : { path: record.path }),
      ...(rpc === undefined ? {} : { rpc }),
      status,
      ...(code === undefined ? {} : { code }),
      durationMs: Math.round(durationMs * 100) / 100,
      ...(record.tenant === undefined ? {} : { tenant: record.tenant }),
    });
    // Every 500 is logged: one that no handler saw (Connect answered it while reading or writing the
    // message) has no cause to give, but the line says which request it was.
    const seen = record.code ?? wireCode;
    const internal = completed && (sent === 500 || (seen !== undefined && INTERNAL_CODES.has(seen)));
    if (internal && !record.failureLogged) {
      logger.error("request failed before or after its handler; Connect answered it without a cause to log", {
        requestId: record.id,
        protocol,
        ...(rpc === undefined ? {} : { rpc }),
        status,
        ...(code === undefined ? {} : { code }),
      });
    }
    metrics.observe({
      protocol,
      operation: rpc ?? record.endpoint ?? "unmatched",
      code: isRpc ? (code ?? "unknown") : String(status),
      seconds: durationMs / 1000,
    });
  }
}
