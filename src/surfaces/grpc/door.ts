/**
 * The gRPC door: binary gRPC POSTs (`application/grpc`, `+proto`) of the registry's own RPCs, unary
 * (unary.ts) and the watch (stream.ts), served through the pipeline. gRPC's JSON codec, gRPC-Web, health and
 * reflection go on to Connect's router.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import { rpcProtocolOf } from "../../observability/request-record.js";
import type { Operations } from "../../operations/operation.js";
import type { Admit, Door } from "../pipeline/door.js";
import { rpcCallOf } from "../pipeline/door.js";
import type { MessageChecks } from "../pipeline/message-check.js";
import type { RpcOptions } from "../pipeline/pipeline.js";
import { isBinaryGrpc } from "./request.js";
import { serveGrpcStream } from "./stream.js";
import { serveGrpc } from "./unary.js";

export interface GrpcDoorOptions {
  /** The registry's unary RPCs by request path. */
  readonly unary: ReadonlyMap<string, DescMethod>;
  /** The registry's server-streaming RPCs by request path. */
  readonly streams: ReadonlyMap<string, DescMethod>;
  readonly operations: Operations;
  readonly checks: MessageChecks;
  readonly admit: Admit;
  readonly options: RpcOptions;
}

export function grpcDoor({ unary, streams, operations, checks, admit, options }: GrpcDoorOptions): Door<DescMethod> {
  return {
    name: "grpc",
    matches(req, { pathname }) {
      if (req.method !== "POST" || !isBinaryGrpc(req.header("content-type"))) return undefined;
      return unary.get(pathname) ?? streams.get(pathname);
    },
    async serve(req, method, record) {
      record.protocol = rpcProtocolOf(req.header("content-type"));
      const operation = operations.get(method);
      if (operation === undefined) throw new Error(`${method.name} has no operation.`);
      const check = checks(method);
      const call = rpcCallOf(
        req,
        { operation, admission: await admit(req, operation, record), record },
        (body, length, c) => check.grpcMessage(body, length, c),
      );
      if (method.methodKind === "server_streaming") return { stream: await serveGrpcStream(call, options) };
      return { http: await serveGrpc(call, options) };
    },
  };
}
