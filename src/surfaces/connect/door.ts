/**
 * The Connect door: Connect unary POSTs (JSON and protobuf) of the registry's own unary RPCs, served through
 * the pipeline (unary.ts). Connect GETs and streaming content types go on to Connect's router.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import { admittedRpcCall, type Door, type RpcDoorParts } from "../pipeline/door.js";
import type { RpcOptions } from "../pipeline/pipeline.js";
import { connectUnaryFormat } from "./request.js";
import { serveConnect } from "./unary.js";

export interface ConnectDoorOptions extends RpcDoorParts {
  /** The registry's unary RPCs by request path. */
  readonly unary: ReadonlyMap<string, DescMethod>;
  readonly options: RpcOptions;
}

export function connectDoor(parts: ConnectDoorOptions): Door<{ method: DescMethod; binary: boolean }> {
  const { unary, options } = parts;
  return {
    name: "connect",
    matches(req, { pathname }) {
      const method = req.method === "POST" ? unary.get(pathname) : undefined;
      const format = method === undefined ? undefined : connectUnaryFormat(req.header("content-type"));
      return format === undefined ? undefined : { method: method as DescMethod, binary: format.binary };
    },
    async serve(req, { method, binary }, record) {
      const call = await admittedRpcCall(
        req,
        method,
        parts,
        record,
        (check) => (body, length, c) => check.connectMessage(body, length, c, binary),
      );
      return { http: await serveConnect(call, binary, options) };
    },
  };
}
