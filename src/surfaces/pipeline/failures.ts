import { asRegistryError, isServerSide, RegistryError } from "../../domain/errors.js";
import type { Logger } from "../../logger.js";
import type { RequestRecord } from "../../observability/request-record.js";

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
 * A refusal by design (RegistryError.designed) is no fault either: it is
 * counted, and one `warn` line per reason and interval says how many there
 * were (RefusalLog), so a flood of refused requests is not a flood of lines.
 */
export function callerError(
  err: unknown,
  logger: Logger,
  procedure: string,
  context: FailureContext = {},
): RegistryError {
  const error = asRegistryError(err);
  if (context.clientGone === true && !(err instanceof RegistryError)) return error;
  // A refusal by design (rate limit, busy gate, issuer down, drain) is the service working: counted, not an
  // error per request.
  if (error.designed) {
    if (context.record?.failureLogged !== true) refusalsOf(logger).count(error, procedure);
    if (context.record !== undefined) context.record.failureLogged = true;
    return error;
  }
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

/** How often the refusals by design are summed up in the log: one `warn` line per reason at most this often. */
export const REFUSAL_LOG_INTERVAL_MS = 10_000;

/** Counts refusals by design and logs them aggregated. */
export interface RefusalLog {
  /** Counts one refused request; the first of an interval starts its timer. */
  count(error: RegistryError, procedure: string): void;
  /** Logs what was counted since the last line (one `warn` line per reason with its count) and starts over. */
  flush(): void;
}

/**
 * One `warn` line per reason (the error's message) per interval:
 * `{"message":"requests refused","code","reason","count","procedures","intervalMs"}`,
 * written when the interval that began with its first refusal ends (or at
 * flush). Nothing is kept per request beyond a count, and the timer runs only
 * while there is something to tell; it never holds the process open.
 */
export function createRefusalLog(logger: Logger, intervalMs = REFUSAL_LOG_INTERVAL_MS): RefusalLog {
  const pending = new Map<string, { code: string; count: number; procedures: Set<string> }>();
  let timer: ReturnType<typeof setTimeout> | undefined;
  /** The most procedures a line names: a reason spans few, and the line must stay small. */
  const maxProcedures = 8;
  const log: RefusalLog = {
    count(error, procedure) {
      const entry = pending.get(error.message) ?? { code: error.code, count: 0, procedures: new Set<string>() };
      entry.count++;
      if (entry.procedures.size < maxProcedures) entry.procedures.add(procedure);
      pending.set(error.message, entry);
      if (timer === undefined) {
        timer = setTimeout(() => log.flush(), intervalMs);
        timer.unref?.();
      }
    },
    flush() {
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      for (const [reason, { code, count, procedures }] of pending) {
        logger.warn("requests refused", { code, reason, count, procedures: [...procedures], intervalMs });
      }
      pending.clear();
    },
  };
  return log;
}

/** The refusal log of each logger: every surface reports through callerError with the app's one logger. */
const refusalLogs = new WeakMap<Logger, RefusalLog>();

/** The refusal log that callerError counts `logger`'s refusals in (made on first use). */
export function refusalsOf(logger: Logger): RefusalLog {
  let log = refusalLogs.get(logger);
  if (log === undefined) {
    log = createRefusalLog(logger);
    refusalLogs.set(logger, log);
  }
  return log;
}
