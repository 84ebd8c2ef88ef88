/**
 * The edge: what every request needs, done once, whichever runtime received it and whichever surface it
 * speaks. It asks its doors in order which serves the request, and that door serves it: the RPCs the edge
 * serves itself (binary gRPC, Connect unary POSTs) and REST through the pipeline (pipeline/pipeline.ts), the
 * other RPCs (gRPC-Web, Connect GET, gRPC's JSON, health, reflection) through Connect's router, plain
 * endpoints and the catalog's pages as they are. Every door that reaches an operation admits its caller here
 * (admission.ts), before any body is read. The runtime adapter (src/node/node-edge.ts, under Node and Deno
 * alike) only translates requests and answers. README.md says which door serves what.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import type { ConnectRouter, ConnectRouterOptions } from "@connectrpc/connect";
import type { Authenticator } from "../auth/authenticator.js";
import type { TokenRechecks } from "../auth/token-rechecks.js";
import type { Catalog } from "../catalog/catalog.js";
import type { PublishedCardKeys } from "../domain/card-keys.js";
import { noResourceAt } from "../domain/errors.js";
import { errorAnswer } from "../http/http-answer.js";
import type { HttpEndpoint } from "../http/http-endpoint.js";
import type { Logger } from "../logger.js";
import type { RequestRecord } from "../observability/request-record.js";
import type { Operations } from "../operations/operation.js";
import { createAdmission } from "./admission.js";
import { connectDoor } from "./connect/door.js";
import { catalogDoor, endpointsDoor } from "./endpoints/door.js";
import { jwksDoor } from "./endpoints/jwks.js";
import { grpcDoor } from "./grpc/door.js";
import { mcpDoor } from "./mcp/door.js";
import { type Door, type EdgeAnswer, type EdgeRequest, requestTarget } from "./pipeline/door.js";
import { checksOf, createMessageCheck } from "./pipeline/message-check.js";
import type { RpcOptions } from "./pipeline/pipeline.js";
import { restDoor } from "./rest/door.js";
import type { RestSurface } from "./rest/surface.js";
import { routerDoor } from "./router/door.js";
import { createRouterCheck } from "./router/message-check.js";

export type { EdgeAnswer, EdgeRequest, RequestAddresses } from "./pipeline/door.js";

export interface EdgeOptions {
  readonly authenticator: Authenticator;
  /** Where a stream follows its caller's token (WATCH_TOKEN_RECHECK_MS); without it a token is checked once. */
  readonly rechecks?: TokenRechecks;
  readonly operations: Operations;
  /** Every Connect route: the registry's RPCs and the tools' (health, reflection). */
  readonly routes: (router: ConnectRouter) => void;
  /** Options of Connect's router (limits, compression) for this runtime. */
  readonly routerOptions: ConnectRouterOptions;
  readonly rest: RestSurface;
  readonly endpoints: readonly HttpEndpoint[];
  readonly maxBodyBytes: number;
  readonly logger: Logger;
  /**
   * The registry's unary RPCs by request path: binary gRPC calls (grpc/) and Connect unary POSTs (connect/) of
   * them are served through the pipeline, the rest by Connect's router.
   */
  readonly unary: ReadonlyMap<string, DescMethod>;
  /** The registry's server-streaming RPCs by request path: binary gRPC calls of them are served by grpc/. */
  readonly streams: ReadonlyMap<string, DescMethod>;
  /** The compressions and threshold of the RPCs the edge serves itself (the router's). */
  readonly rpcOptions: RpcOptions;
  /** The catalog's pages at `/ui/` (and a browser's `/`), when served. */
  readonly catalog?: Catalog;
  /** PUBLIC_URL: the base of the absolute URLs answers hold (MCP's metadata, an AI Catalog's entries). */
  readonly publicUrl?: string | undefined;
  /** MCP at `/mcp` and its protected resource metadata, when served: the issuer of the tokens it takes. */
  readonly mcp?: { readonly issuer: string; readonly version: string };
  /** The card signing keys `/.well-known/jwks.json` publishes (issue 43). */
  readonly cardKeys: PublishedCardKeys;
}

/** Serves one request; `record` is its access-log record, begun by the runtime adapter. */
export type Edge = (req: EdgeRequest, record: RequestRecord) => Promise<EdgeAnswer>;

/** The edge's doors, in the order they are asked. */
export function createDoors(options: EdgeOptions): readonly Door<unknown>[] {
  const { operations, unary, streams, rpcOptions } = options;
  const admit = createAdmission(options);
  const compressions = options.routerOptions.acceptCompression ?? [];
  const checks = checksOf(operations, (method) => createMessageCheck(method, options.maxBodyBytes, compressions));
  const routerChecks = checksOf(operations, (method) => createRouterCheck(method, options.maxBodyBytes, compressions));
  return [
    grpcDoor({ unary, streams, operations, checks, admit, options: rpcOptions }),
    connectDoor({ unary, operations, checks, admit, options: rpcOptions }),
    routerDoor({
      routes: options.routes,
      routerOptions: options.routerOptions,
      operations,
      checks: routerChecks,
      admit,
    }),
    endpointsDoor(options.endpoints),
    ...(options.mcp === undefined
      ? []
      : [
          mcpDoor({
            operations,
            admit,
            maxBodyBytes: options.maxBodyBytes,
            logger: options.logger,
            issuer: options.mcp.issuer,
            version: options.mcp.version,
            publicUrl: options.publicUrl,
          }),
        ]),
    jwksDoor(options.cardKeys),
    ...(options.catalog === undefined ? [] : [catalogDoor(options.catalog)]),
    restDoor(options.rest, admit),
  ];
}

export function createEdge(options: EdgeOptions): Edge {
  const doors = createDoors(options);
  return async (req, record) => {
    const target = requestTarget(req.target);
    for (const door of doors) {
      const match = door.matches(req, target);
      if (match === undefined) continue;
      const answer = await door.serve(req, match, record);
      if (answer !== undefined) return answer;
    }
    record.protocol = "http";
    return { http: errorAnswer(noResourceAt(target.pathname)) };
  };
}
