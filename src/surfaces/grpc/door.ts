/**
 * The gRPC door: binary gRPC POSTs (`application/grpc`, `+proto`) of the registry's own RPCs, unary
 * (unary.ts) and the watch (stream.ts), served through the pipeline. gRPC's JSON codec, gRPC-Web, health and
 * reflection go on to Connect's router.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import { admittedRpcCall, type Door, type RpcDoorParts } from "../pipeline/door.js";
import type { RpcOptions } from "../pipeline/pipeline.js";
import { isBinaryGrpc } from "./request.js";
import { serveGrpcStream } from "./stream.js";
import { serveGrpc } from "./unary.js";

export interface GrpcDoorOptions extends RpcDoorParts {
  /** The registry's unary RPCs by request path. */
  readonly unary: ReadonlyMap<string, DescMethod>;
  /** The registry's server-streaming RPCs by request path. */
  readonly streams: ReadonlyMap<string, DescMethod>;
  readonly options: RpcOptions;
}

export function grpcDoor(parts: GrpcDoorOptions): Door<DescMethod> {
  const { unary, streams, options } = parts;
  return {
    name: "grpc",
    matches(req, { pathname }) {
      if (req.method !== "POST" || !isBinaryGrpc(req.header("content-type"))) return undefined;
      return unary.get(pathname) ?? streams.get(pathname);
    },
    async serve(req, method, record) {
      const call = await admittedRpcCall(
        req,
        method,
        parts,
        record,
        (check) => (body, length, c) => check.grpcMessage(body, length, c),
      );
      if (method.methodKind === "server_streaming") return { stream: await serveGrpcStream(call, options) };
      return { http: await serveGrpc(call, options) };
    },
  };
}
