/**
 * How failures reach the log (issue 25, item 7): the service's faults as one
 * `error` line each, refusals by design (rate limits, busy gate, issuer down)
 * as one `warn` line per reason and interval with a count.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { tooManyIntrospections } from "../../src/auth/auth-errors.js";
import { refusal, unavailable } from "../../src/domain/errors.js";
import { createRequestRecord } from "../../src/observability/request-record.js";
import { callerError, REFUSAL_LOG_INTERVAL_MS } from "../../src/surfaces/pipeline/failures.js";
import { capturingLogger } from "../support/capturing-logger.js";

describe("callerError", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("logs a refusal by design at warn, once per interval with its count, never as an error line per request", () => {
    vi.useFakeTimers();
    const logger = capturingLogger();
    for (let i = 0; i < 50; i++)
      callerError(tooManyIntrospections(), logger, "asor.v1.AgentDefinitionService/ListAgentDefinitions");
    for (let i = 0; i < 3; i++)
      callerError(
        refusal("The registry is busy with other searches; try again later."),
        logger,
        "asor.v1.AgentDefinitionService/ListAgentDefinitions",
      );
    expect(logger.lines).toEqual([]);
    vi.advanceTimersByTime(REFUSAL_LOG_INTERVAL_MS);
    expect(logger.lines).toEqual([
      expect.objectContaining({
        level: "warn",
        message: "requests refused",
        code: "UNAVAILABLE",
        reason: expect.stringMatching(/Too many unknown opaque tokens/),
        count: 50,
      }),
      expect.objectContaining({
        level: "warn",
        message: "requests refused",
        code: "UNAVAILABLE",
        reason: expect.stringMatching(/busy with other searches/),
        count: 3,
      }),
    ]);
    // The next interval starts with the next refusal, and counts from zero.
    vi.advanceTimersByTime(REFUSAL_LOG_INTERVAL_MS * 3);
    expect(logger.lines).toHaveLength(2);
    callerError(tooManyIntrospections(), logger, "asor.v1.TenantAdminService/ListTenants");
    vi.advanceTimersByTime(REFUSAL_LOG_INTERVAL_MS);
    expect(logger.lines.slice(2)).toEqual([
      expect.objectContaining({ level: "warn", count: 1, procedures: ["asor.v1.TenantAdminService/ListTenants"] }),
    ]);
  });

  it("counts a request refused at the edge and again inside its RPC once", () => {
    vi.useFakeTimers();
    const logger = capturingLogger();
    const record = createRequestRecord({
      method: "POST",
      path: "/asor.v1.AgentDefinitionService/ListAgentDefinitions",
      requestIdHeader: null,
    });
    callerError(tooManyIntrospections(), logger, "p", { record });
    callerError(tooManyIntrospections(), logger, "p", { record });
    vi.advanceTimersByTime(REFUSAL_LOG_INTERVAL_MS);
    expect(logger.lines).toEqual([expect.objectContaining({ level: "warn", count: 1 })]);
  });

  it("still logs the service's own faults (a database that is down) as one error line each", () => {
    const logger = capturingLogger();
    for (let i = 0; i < 2; i++) callerError(unavailable(new Error("connect ECONNREFUSED")), logger, "p");
    expect(logger.lines.map((l) => [l.level, l.message])).toEqual([
      ["error", "request failed"],
      ["error", "request failed"],
    ]);
  });
});
