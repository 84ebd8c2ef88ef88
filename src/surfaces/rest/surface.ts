/**
 * The REST surface: the route table built from the `google.api.http` rules,
 * and each request of a route through the pipeline (pipeline.ts): decoded
 * into the operation's input (request.ts), run, answered as JSON
 * (unary.ts) or, for a watch, as Server-Sent Events (stream.ts).
 */
import { invalid, issueAt } from "../../domain/errors.js";
import type { HttpAnswer, StreamAnswer } from "../../http/http-answer.js";
import type { Logger } from "../../logger.js";
import type { Operation, Operations } from "../../operations/operation.js";
import { REGISTRY_SERVICES } from "../../operations/registry-operations.js";
import { callerError } from "../pipeline/failures.js";
import { type PipelineCall, runPipeline } from "../pipeline/pipeline.js";
import { decodeRestRequest, mediaTypeOf, type RestRequestParts } from "./request.js";
import { buildRouteTable, createsOf, matchRoute, type RestRoute } from "./route-table.js";
import { restFailure } from "./status.js";
import { eventStream } from "./stream.js";
import { notModified, restAnswer } from "./unary.js";

/** A request's REST route: the binding and its path variables, or the verbs its path takes (405). */
export type RestMatch =
  | {
      readonly route: RestRoute;
      readonly operation: Operation;
      readonly vars: ReadonlyMap<string, string>;
      readonly allowed?: undefined;
    }
  | { readonly allowed: readonly string[]; readonly route?: undefined };

/** A REST request as the edge hands it on: admitted (or refused), its body still to read. */
export interface RestCall extends PipelineCall {
  /** The request path (a write's `Location` is made from it). */
  readonly pathname: string;
  /** The query string, without its `?`. */
  readonly query: string;
  header(name: string): string | undefined;
  /** The body, as it arrives; read at most once. */
  body(): AsyncIterable<Uint8Array>;
  /** Whether the client has closed the request before its answer was sent. */
  clientGone(): boolean;
  /** The request came on an HTTP/1.x connection. */
  readonly http1: boolean;
}

/** A REST answer: one HTTP answer, or a watch's Server-Sent Events. */
export type RestAnswer =
  | { readonly http: HttpAnswer; readonly stream?: undefined }
  | { readonly stream: StreamAnswer; readonly http?: undefined };

export interface RestSurface {
  /** The REST route of `verb` on `pathname`; undefined when the path is not part of the REST surface. */
  match(verb: string, pathname: string): RestMatch | undefined;
  /**
   * Serves a request of a route through the pipeline: its input decoded (body, path, query), the operation run,
   * its result answered as JSON, or (a server-streaming RPC's binding) its events as Server-Sent Events.
   */
  serve(match: RestMatch & { route: RestRoute }, call: RestCall): Promise<RestAnswer>;
}

export interface RestSurfaceOptions {
  readonly operations: Operations;
  /** Largest request body accepted, in bytes. */
  readonly maxBodyBytes: number;
  /** Where a failure is logged. */
  readonly logger: Logger;
}

export function createRestSurface({ operations, maxBodyBytes, logger }: RestSurfaceOptions): RestSurface {
  const table = buildRouteTable(REGISTRY_SERVICES).map((route) => {
    const operation = operations.get(route.method);
    if (operation === undefined) throw new Error(`REST route ${route.verb} ${route.template} has no operation.`);
    return { route, operation };
  });

  return {
    match(verb, pathname) {
      const parts = pathname.replace(/^\/+/, "").split("/");
      const allowed: string[] = [];
      for (const { route, operation } of table) {
        const vars = matchRoute(route, parts);
        if (vars === undefined) continue;
        if (route.verb === verb) return { route, operation, vars };
        if (!allowed.includes(route.verb)) allowed.push(route.verb);
      }
      return allowed.length > 0 ? { allowed } : undefined;
    },

    serve({ route, vars }, call) {
      const { record } = call;
      const watch = route.method.methodKind === "server_streaming";
      const contentType = call.header("content-type") ?? "";
      const length = call.header("content-length");
      const parts: RestRequestParts = {
        mediaType: mediaTypeOf(contentType),
        contentType,
        contentLength: length === undefined ? undefined : Number(length),
        body: call.body(),
        ifMatch: call.header("if-match"),
        ifNoneMatch: call.header("if-none-match"),
      };
      const query = new URLSearchParams(call.query);
      return runPipeline<RestAnswer>(call, {
        decode: async () => {
          const input = await decodeRestRequest(route, vars, query, parts, maxBodyBytes);
          if (watch) sinceLastEvent(input as { since?: bigint }, call.header("last-event-id"));
          return input;
        },
        encode: (result) => {
          if (watch) {
            if (result.kind !== "events") throw new Error(`${route.method.name} answered no stream.`);
            return {
              stream: eventStream(result.events, (err) => callerError(err, logger, record.rpc ?? "", { record })),
            };
          }
          // Decided before the answer's body is built: a 304 needs only the ETag.
          const unchanged =
            route.verb === "GET" && parts.ifNoneMatch !== undefined
              ? notModified(result, parts.ifNoneMatch)
              : undefined;
          return { http: unchanged ?? restAnswer(result, route.method.output, createsOf(route), call.pathname) };
        },
        fail: (err) => restFailure(err, call, logger),
      });
    },
  };
}

/** A watch starts at `Last-Event-ID` (an EventSource sends back the last `id:` it read) when the query names none. */
function sinceLastEvent(input: { since?: bigint }, lastEventId: string | undefined): void {
  if (input.since !== undefined || lastEventId === undefined) return;
  // Ids are revisions.
  if (!/^\d{1,15}$/.test(lastEventId.trim()))
    throw invalid([
      issueAt("Last-Event-ID", "INVALID_TYPE", `Last-Event-ID must be a revision (digits), not "${lastEventId}".`),
    ]);
  input.since = BigInt(lastEventId.trim());
}
