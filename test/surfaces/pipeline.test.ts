/**
 * What a call the edge serves itself answers when it fails (src/surfaces/pipeline/pipeline.ts, through the gRPC
 * surface): Connect's own errors as they are, a client's connection failing mid-body as CANCELED, and anything
 * else INTERNAL with the original logged once and never shown. The request's context values and gRPC's header
 * negotiation, each against what Connect's own would do.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextKey } from "@connectrpc/connect";
import { compressionGzip } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { GetAgentDefinitionRequestSchema } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { createRequestRecord, recordOf, requestValues } from "../../src/observability/request-record.js";
import type { Operation } from "../../src/operations/operation.js";
import { REGISTRY_SERVICES } from "../../src/operations/registry-operations.js";
import { grpcRequestOptions } from "../../src/surfaces/grpc/request.js";
import { serveGrpc } from "../../src/surfaces/grpc/unary.js";
import type { RpcCall } from "../../src/surfaces/pipeline/pipeline.js";
import { capturingLogger } from "../support/capturing-logger.js";

const method = REGISTRY_SERVICES[0]!.methods.find((m) => m.methodKind === "unary")!;

/** A binary gRPC call of `method`, admitted, whose message reads as `message` and whose operation is `run`. */
function call(
  message: RpcCall["message"],
  run: Operation["run"] = async () => ({ kind: "message", message: create(method.output) }),
): RpcCall {
  const record = createRequestRecord({ method: "POST", path: "/x", requestIdHeader: undefined });
  const principal = { subject: "s", tenant: null, domains: new Set<string>(), platformAdmin: false } as never;
  return {
    operation: { method, domains: [], run } as Operation,
    admission: { call: { principal, record } },
    record,
    header: () => undefined,
    signal: undefined,
    message,
  };
}

/** The gRPC status a call answers: its code and message. */
async function statusOf(c: RpcCall, logger = capturingLogger()) {
  const answer = await serveGrpc(c, { logger, acceptCompression: [], compressMinBytes: 1024 });
  return { code: Number(answer.trailers?.["grpc-status"]), message: answer.trailers?.["grpc-message"] ?? "" };
}

describe("a call's failures", () => {
  it("answers a failure it does not know INTERNAL, logs the original once, and shows nothing of it", async () => {
    const logger = capturingLogger();
    const failure = await statusOf(
      call(
        async () => ({ message: create(GetAgentDefinitionRequestSchema) }),
        async () => {
          throw new Error("secret detail: SELECT 1");
        },
      ),
      logger,
    );
    expect(failure.code).toBe(Code.Internal);
    expect(failure.message).not.toContain("secret detail");
    const errors = logger.lines.filter((l) => l.level === "error");
    expect(errors).toHaveLength(1);
    expect(JSON.stringify(errors[0])).toContain("secret detail");
  });

  it("answers Connect's own errors as they are, unlogged", async () => {
    const logger = capturingLogger();
    const own = new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument);
    const failure = await statusOf(
      call(async () => ({ failure: own })),
      logger,
    );
    expect(failure).toEqual({ code: own.code, message: own.rawMessage });
    expect(logger.lines.filter((l) => l.level === "error")).toHaveLength(0);
  });

  it("answers a body whose connection failed under it CANCELED, not INTERNAL", async () => {
    const gone = call(async () => ({ failure: new Error("stream reset: NGHTTP2_INTERNAL_ERROR") }));
    expect((await statusOf(gone)).code).toBe(Code.Canceled);
  });
});

describe("a request's context values", () => {
  it("answers a key's default until it is set, the value once set, the default again once deleted", () => {
    const record = createRequestRecord({ method: "GET", path: "/x", requestIdHeader: undefined });
    const key = createContextKey<number>(7);
    const values = requestValues(record);
    expect(recordOf(values)).toBe(record);
    expect(values.get(key)).toBe(7);
    expect(values.set(key, 8).get(key)).toBe(8);
    expect(values.delete(key).get(key)).toBe(7);
    expect(requestValues(record).get(key)).toBe(7);
  });
});

describe("a gRPC call's compression and deadline", () => {
  const options = { logger: capturingLogger(), acceptCompression: [compressionGzip], compressMinBytes: 1024 };
  const headers = (values: Record<string, string>) => ({ header: (name: string) => values[name] });

  it("negotiates each pair of headers as Connect does, the same answer when it comes again", () => {
    for (let i = 0; i < 2; i++) {
      const gzip = grpcRequestOptions(
        headers({ "grpc-encoding": "gzip", "grpc-accept-encoding": "br, gzip" }),
        options,
      );
      expect(gzip.compression).toEqual({ request: compressionGzip, response: compressionGzip, error: undefined });
      const plain = grpcRequestOptions(headers({ "grpc-accept-encoding": "identity" }), options);
      expect(plain.compression).toEqual({ request: null, response: null, error: undefined });
      expect(plain.timeout).toEqual({});
    }
  });

  it("refuses an unknown encoding and a malformed deadline every time they come", () => {
    for (let i = 0; i < 2; i++) {
      const unknown = grpcRequestOptions(headers({ "grpc-encoding": "zstd" }), options);
      expect(unknown.compression.error?.code).toBe(Code.Unimplemented);
      const malformed = grpcRequestOptions(headers({ "grpc-timeout": "soon" }), options);
      expect(malformed.timeout.error?.code).toBe(Code.InvalidArgument);
      expect(grpcRequestOptions(headers({ "grpc-timeout": "2S" }), options).timeout).toEqual({ timeoutMs: 2000 });
    }
  });
});
