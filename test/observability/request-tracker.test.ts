/**
 * The access log's rules for failures (issue 12, items 6 and 9): every 500 gives an error line
 * naming the request, even one no handler saw; a client that left is an info line with 499.
 */
import { describe, expect, it } from "vitest";
import { createMetrics } from "../../src/observability/metrics.js";
import { createRequestTracker } from "../../src/observability/request-tracker.js";
import { type Operation, type Result, runOperation } from "../../src/operations/operation.js";
import { capturingLogger } from "../support/capturing-logger.js";

const tracker = () => {
  const logger = capturingLogger();
  const metrics = createMetrics({
    poolStats: () => ({ used: 0, free: 0, pendingAcquires: 0, max: 1, searchesWaiting: 0 }),
  });
  return { logger, requests: createRequestTracker({ logger, metrics }) };
};

describe("the request tracker", () => {
  it("logs a 500 that no handler logged at error, with its request id", () => {
    const { logger, requests } = tracker();
    const record = requests.start({
      method: "POST",
      path: "/asor.v1.AgentDefinitionService/UpsertAgentDefinition",
      requestIdHeader: "unseen-500",
    });
    record.protocol = "connect";
    requests.finish(record, { status: 500, completed: true });
    expect(logger.lines.filter((l) => l.level === "error")).toEqual([
      expect.objectContaining({ requestId: "unseen-500", status: 500 }),
    ]);
  });

  it("logs a gRPC answer ending in INTERNAL that no handler logged", () => {
    const { logger, requests } = tracker();
    const record = requests.start({
      method: "POST",
      path: "/asor.v1.AgentDefinitionService/UpsertAgentDefinition",
      requestIdHeader: "grpc-internal",
    });
    record.protocol = "grpc";
    requests.finish(record, { status: 200, completed: true, wireCode: "internal" });
    expect(logger.lines.filter((l) => l.level === "error")).toEqual([
      expect.objectContaining({ requestId: "grpc-internal", code: "internal" }),
    ]);
  });

  it("does not log a 500 twice once its cause was logged", () => {
    const { logger, requests } = tracker();
    const record = requests.start({
      method: "GET",
      path: "/api/asor/v1/default/agentDefinition",
      requestIdHeader: "logged",
    });
    record.protocol = "rest";
    record.failureLogged = true;
    requests.finish(record, { status: 500, completed: true });
    expect(logger.lines.filter((l) => l.level === "error")).toEqual([]);
  });

  it("a client that left is one info line with 499 and code canceled, whatever Connect wrote after it left", () => {
    const { logger, requests } = tracker();
    const record = requests.start({
      method: "POST",
      path: "/asor.v1.AgentDefinitionService/UpsertAgentDefinition",
      requestIdHeader: "left",
    });
    record.protocol = "grpc";
    requests.finish(record, { status: 200, completed: false, wireCode: "invalid_argument" });
    expect(logger.lines).toEqual([
      expect.objectContaining({ level: "info", message: "request", requestId: "left", status: 499, code: "canceled" }),
    ]);
  });

  it.each(["rest", "connect"])(
    "a %s request whose answer was made but never reached its client is 499 and canceled, not ok",
    (protocol) => {
      const { logger, requests } = tracker();
      const record = requests.start({
        method: "GET",
        path: "/api/asor/v1/default/agentDefinition",
        requestIdHeader: "abandoned",
      });
      record.protocol = protocol as "rest";
      // The operation succeeded (the edge noted ok), then the stream was reset before the answer was written.
      record.code = "ok";
      requests.finish(record, { status: 200, completed: false });
      expect(logger.lines).toEqual([
        expect.objectContaining({ requestId: "abandoned", status: 499, code: "canceled" }),
      ]);
    },
  );

  it(
    "writes the line of a client that left once its operation's work settles, with the duration of that " + "work",
    async () => {
      const { logger, requests } = tracker();
      const record = requests.start({
        method: "GET",
        path: "/api/asor/v1/default/agentDefinition",
        requestIdHeader: "left-mid-search",
      });
      record.protocol = "rest";
      let finishWork: (result: Result) => void = () => undefined;
      const operation = { run: () => new Promise<Result>((resolve) => (finishWork = resolve)) } as unknown as Operation;
      const work = runOperation(operation, { principal: {} as never, record }, {} as never);
      // The connection closes while the search still runs: no line yet.
      requests.finish(record, { status: 200, completed: false });
      expect(logger.lines).toEqual([]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const settledAt = performance.now();
      finishWork({ kind: "message", message: {} as never });
      await work;
      await new Promise((resolve) => setImmediate(resolve));
      expect(logger.lines).toEqual([
        expect.objectContaining({ level: "info", message: "request", requestId: "left-mid-search", status: 499 }),
      ]);
      // The line counts the work up to its end, not the moment the client left.
      expect(logger.lines[0]?.durationMs).toBeGreaterThanOrEqual(
        Math.floor((settledAt - record.startedAt) * 100) / 100,
      );
      expect(record.work).toBeUndefined();
    },
  );

  it("writes the line at once when the operation settled before the answer ended", async () => {
    const { logger, requests } = tracker();
    const record = requests.start({
      method: "GET",
      path: "/api/asor/v1/default/agentDefinition",
      requestIdHeader: "done",
    });
    record.protocol = "rest";
    const operation = { run: () => Promise.reject(new Error("failed")) } as unknown as Operation;
    await runOperation(operation, { principal: {} as never, record }, {} as never).catch(() => undefined);
    requests.finish(record, { status: 200, completed: true });
    expect(logger.lines).toEqual([expect.objectContaining({ requestId: "done", status: 200 })]);
  });
});
