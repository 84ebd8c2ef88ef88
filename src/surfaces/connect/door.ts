/**
 * The Connect door: Connect unary POSTs (JSON and protobuf) of the registry's own unary RPCs, served through
 * the pipeline (unary.ts). Connect GETs and streaming content types go on to Connect's router.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import { rpcProtocolOf } from "../../observability/request-record.js";
import type { Operations } from "../../operations/operation.js";
import type { Admit, Door } from "../pipeline/door.js";
import { rpcCallOf } from "../pipeline/door.js";
import type { MessageChecks } from "../pipeline/message-check.js";
import type { RpcOptions } from "../pipeline/pipeline.js";
import { connectUnaryFormat } from "./request.js";
import { serveConnect } from "./unary.js";

export interface ConnectDoorOptions {
  /** The registry's unary RPCs by request path. */
  readonly unary: ReadonlyMap<string, DescMethod>;
  readonly operations: Operations;
  readonly checks: MessageChecks;
  readonly admit: Admit;
  readonly options: RpcOptions;
}

export function connectDoor({
  unary,
  operations,
  checks,
  admit,
  options,
}: ConnectDoorOptions): Door<{ method: DescMethod; binary: boolean }> {
  return {
    name: "connect",
    matches(req, { pathname }) {
      const method = req.method === "POST" ? unary.get(pathname) : undefined;
      const format = method === undefined ? undefined : connectUnaryFormat(req.header("content-type"));
      return format === undefined ? undefined : { method: method as DescMethod, binary: format.binary };
    },
    async serve(req, { method, binary }, record) {
      record.protocol = rpcProtocolOf(req.header("content-type"));
      const operation = operations.get(method);
      if (operation === undefined) throw new Error(`${method.name} has no operation.`);
      const check = checks(method);
      const call = rpcCallOf(
        req,
        { operation, admission: await admit(req, operation, record), record },
        (body, length, c) => check.connectMessage(body, length, c, binary),
      );
      return { http: await serveConnect(call, binary, options) };
    },
  };
}
