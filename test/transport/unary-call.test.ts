/**
 * What a lean call answers when it fails outside the interceptors (src/transport/unary-call.ts): Connect's
 * own errors as they are, a client's connection failing mid-body as CANCELED, and anything else INTERNAL
 * with the original logged once and never shown.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextValues } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { GetAgentDefinitionRequestSchema } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { createRequestRecord, requestRecordKey } from "../../src/observability/request-record.js";
import { REGISTRY_SERVICES } from "../../src/operations/registry-operations.js";
import type { RegistryServiceImpl } from "../../src/transport/registry-routes.js";
import { createUnaryMethods, failureOf, outputOf, type UnaryCall } from "../../src/transport/unary-call.js";
import { capturingLogger } from "../support/capturing-logger.js";

const service = REGISTRY_SERVICES[0]!;
const implementations: RegistryServiceImpl[] = [
  {
    service,
    implementation: Object.fromEntries(
      service.methods.map((m) => [m.localName, async () => create(GetAgentDefinitionRequestSchema)]),
    ) as never,
    options: { interceptors: [], jsonOptions: {} },
  },
];
const unary = [...createUnaryMethods(implementations, []).values()][0]!;

function call(message: UnaryCall["message"]): UnaryCall {
  return {
    header: () => undefined,
    headers: () => ({}),
    url: "http://localhost/x",
    signal: undefined,
    contextValues: createContextValues().set(
      requestRecordKey,
      createRequestRecord({ method: "POST", path: "/x", requestIdHeader: undefined }),
    ),
    message,
  };
}

describe("a lean call's failures", () => {
  it("answers a failure it does not know INTERNAL, logs the original once, and shows nothing of it", () => {
    const logger = capturingLogger();
    const failure = failureOf(
      new Error("secret detail: SELECT 1"),
      unary,
      call(async () => ({ failure: 1 })),
      logger,
    );
    expect(failure.code).toBe(Code.Internal);
    expect(failure.rawMessage).not.toContain("secret detail");
    const errors = logger.lines.filter((l) => l.level === "error");
    expect(errors).toHaveLength(1);
    expect(JSON.stringify(errors[0])).toContain("secret detail");
  });

  it("answers Connect's own errors as they are, unlogged", () => {
    const logger = capturingLogger();
    const own = new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument);
    expect(
      failureOf(
        own,
        unary,
        call(async () => ({ failure: own })),
        logger,
      ),
    ).toBe(own);
    expect(logger.lines.filter((l) => l.level === "error")).toHaveLength(0);
  });

  it("answers a body whose connection failed under it CANCELED, not INTERNAL", async () => {
    const gone = call(async () => ({ failure: new Error("stream reset: NGHTTP2_INTERNAL_ERROR") }));
    const context = { values: gone.contextValues } as never;
    const err = await outputOf(unary, context, gone, { request: null }, {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.Canceled);
  });
});
