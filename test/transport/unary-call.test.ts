/**
 * What a lean call answers when it fails outside the interceptors (src/transport/unary-call.ts): Connect's
 * own errors as they are, a client's connection failing mid-body as CANCELED, and anything else INTERNAL
 * with the original logged once and never shown. Its context's headers, the request's context values and
 * gRPC's header negotiation, each against what Connect's own would do.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextKey, createContextValues, type HandlerContext } from "@connectrpc/connect";
import { compressionGzip } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { GetAgentDefinitionRequestSchema } from "../../gen/asor/v1/agent_definition_service_pb.js";
import {
  createRequestRecord,
  recordOf,
  requestRecordKey,
  requestValues,
} from "../../src/observability/request-record.js";
import { REGISTRY_SERVICES } from "../../src/operations/registry-operations.js";
import { grpcRequestOptions } from "../../src/transport/grpc-unary.js";
import type { RegistryServiceImpl } from "../../src/transport/registry-routes.js";
import {
  createUnaryMethods,
  failureOf,
  handlerContext,
  outputOf,
  plainHeaders,
  type UnaryCall,
} from "../../src/transport/unary-call.js";
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

describe("a lean call's context", () => {
  const protocol = { name: "grpc", contentType: "application/grpc+proto", binary: true };
  const newContext = () =>
    handlerContext(
      unary.method,
      call(async () => ({ failure: 1 })),
      undefined,
      protocol,
    );

  it("hands its headers over as the answer's record, and a later change does not reach that record", () => {
    const context = newContext();
    context.responseHeader.set("ETag", '"1"');
    context.responseHeader.append("x-list", "a");
    context.responseHeader.append("X-List", "b");
    const record = plainHeaders(context.responseHeader);
    expect(record).toEqual({ "content-type": "application/grpc+proto", etag: '"1"', "x-list": "a, b" });
    context.responseHeader.set("etag", '"2"');
    context.responseHeader.delete("x-list");
    expect(record.etag).toBe('"1"');
    expect(record["x-list"]).toBe("a, b");
    expect(context.responseHeader.get("etag")).toBe('"2"');
    expect(context.responseHeader.has("x-list")).toBe(false);
  });

  it("keeps a header named __proto__ as a header, not as the record's prototype", () => {
    const context = newContext();
    context.responseTrailer.set("__proto__", "x");
    const record = plainHeaders(context.responseTrailer);
    expect(Object.getPrototypeOf(record)).toBe(Object.prototype);
    expect(Object.entries(record)).toEqual([["__proto__", "x"]]);
    expect(context.responseTrailer.get("__proto__")).toBe("x");
  });

  it("gives the handler the request's headers and values when an interceptor replaced the values", async () => {
    const key = createContextKey<string>("unset");
    const seen: { signal: boolean; header: string | null; value: string; record: unknown }[] = [];
    const [method] = createUnaryMethods(
      [
        {
          service,
          implementation: Object.fromEntries(
            service.methods.map((m) => [
              m.localName,
              async (_req: unknown, ctx: HandlerContext) => {
                seen.push({
                  signal: ctx.signal instanceof AbortSignal,
                  header: ctx.requestHeader.get("x-probe"),
                  value: ctx.values.get(key),
                  record: recordOf(ctx.values),
                });
                return create(GetAgentDefinitionRequestSchema);
              },
            ]),
          ) as never,
          options: { interceptors: [], jsonOptions: {} },
        },
      ],
      [(next) => (req) => next({ ...req, contextValues: createContextValues().set(key, "replaced") })],
    ).values();
    const probe: UnaryCall = {
      ...call(async () => ({ message: create(GetAgentDefinitionRequestSchema) })),
      header: (name) => (name === "x-probe" ? "sent" : undefined),
      headers: () => ({ "x-probe": "sent" }),
    };
    const context = handlerContext(method!.method, probe, undefined, protocol);
    await outputOf(method!, context, probe, { request: null }, {});
    expect(seen).toEqual([{ signal: true, header: "sent", value: "replaced", record: undefined }]);
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
