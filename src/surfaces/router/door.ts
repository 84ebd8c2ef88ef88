/**
 * The router's door: every RPC the edge does not serve itself (gRPC-Web, Connect GET, gRPC's JSON codec, and
 * health and reflection) goes to Connect's router. The edge's verdict on the caller and the message travels to
 * the handler in the request's context values (routes.ts verdictKey): the one detour of the pipeline, and the
 * one place a verdict is read from context values.
 */
import { type ConnectRouter, type ConnectRouterOptions, createConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { requestValues, rpcProtocolOf } from "../../observability/request-record.js";
import type { Operations } from "../../operations/operation.js";
import type { Admit, Door } from "../pipeline/door.js";
import type { Checks } from "../pipeline/message-check.js";
import type { RouterCheck } from "./message-check.js";
import { verdictKey } from "./routes.js";

export interface RouterDoorOptions {
  /** Every Connect route: the registry's RPCs and the tools' (health, reflection). */
  readonly routes: (router: ConnectRouter) => void;
  /** Options of Connect's router (limits, compression) for this runtime. */
  readonly routerOptions: ConnectRouterOptions;
  readonly operations: Operations;
  /** The router's message checks (message-check.ts). */
  readonly checks: Checks<RouterCheck>;
  readonly admit: Admit;
}

export function routerDoor({
  routes,
  routerOptions,
  operations,
  checks,
  admit,
}: RouterDoorOptions): Door<UniversalHandler> {
  const router = createConnectRouter(routerOptions);
  routes(router);
  const rpcs = new Map<string, UniversalHandler>(router.handlers.map((h) => [h.requestPath, h]));
  return {
    name: "router",
    matches: (_req, { pathname }) => rpcs.get(pathname),
    async serve(req, handler, record) {
      record.protocol = rpcProtocolOf(req.header("content-type"));
      const values = requestValues(record);
      const operation = operations.get(handler.method);
      // Health and reflection carry no registry data: no token.
      if (operation === undefined) return { rpc: await handler(req.universal(values)) };
      const check = checks(handler.method);
      const admission = await admit(req, operation, record);
      if (admission.error !== undefined) {
        values.set(verdictKey, { error: admission.error });
        return { rpc: await handler(check.withoutMessage(req.universal(values))) };
      }
      const { request, problem } = await check.check(req.universal(values));
      values.set(verdictKey, problem === undefined ? { call: admission.call } : { error: problem });
      return { rpc: await handler(request) };
    },
  };
}
