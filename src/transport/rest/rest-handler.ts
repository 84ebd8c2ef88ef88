import { AGENT_CARD_CACHE_CONTROL } from "../../domain/agent-card.js";
import { invalid, issueAt } from "../../domain/errors.js";
import { etagOf, ifNoneMatchMatches, parseEntityTags } from "../../domain/lifecycle.js";
import type { WatchEvent } from "../../domain/watch.js";
import type { HttpAnswer } from "../../http/http-answer.js";
import { type Call, type Operation, type Operations, type Result, runOperation } from "../../operations/operation.js";
import { REGISTRY_SERVICES } from "../../operations/registry-operations.js";
import { decodeRestRequest, type RestRequestParts } from "./rest-request.js";
import { restAnswer } from "./rest-response.js";
import { buildRouteTable, matchRoute, type RestRoute } from "./route-table.js";

/** A request's REST route: the binding and its path variables, or the verbs its path takes (405). */
export type RestMatch =
  | {
      readonly route: RestRoute;
      readonly operation: Operation;
      readonly vars: ReadonlyMap<string, string>;
      readonly allowed?: undefined;
    }
  | { readonly allowed: readonly string[]; readonly route?: undefined };

export interface RestSurface {
  /** The REST route of `verb` on `pathname`; undefined when the path is not part of the REST surface. */
  match(verb: string, pathname: string): RestMatch | undefined;
  /** Runs an admitted request's operation and answers it; a failure is thrown for the edge to answer and record. */
  serve(
    match: RestMatch & { route: RestRoute },
    call: Call,
    query: URLSearchParams,
    parts: RestRequestParts,
    pathname: string,
  ): Promise<HttpAnswer>;
  /**
   * Runs an admitted watch (a server-streaming RPC's binding) and answers its events, for the edge to send
   * as Server-Sent Events. `lastEventId` (the `Last-Event-ID` header) is the start when the query names none.
   */
  watch(
    match: RestMatch & { route: RestRoute },
    call: Call,
    query: URLSearchParams,
    parts: RestRequestParts,
    lastEventId: string | undefined,
  ): Promise<AsyncIterable<readonly WatchEvent[]>>;
}

export interface RestSurfaceOptions {
  readonly operations: Operations;
  /** Largest request body accepted, in bytes. */
  readonly maxBodyBytes: number;
}

export function createRestSurface({ operations, maxBodyBytes }: RestSurfaceOptions): RestSurface {
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

    async serve({ route, operation, vars }, call, query, parts, pathname) {
      const input = await decodeRestRequest(route, vars, query, parts, maxBodyBytes);
      const result = await runOperation(operation, call, input);
      // Decided before the answer's body is built: a 304 needs only the ETag.
      const unchanged =
        route.verb === "GET" && parts.ifNoneMatch !== undefined ? notModified(result, parts.ifNoneMatch) : undefined;
      return unchanged ?? restAnswer(result, route.method.output, route.verb, pathname);
    },

    async watch({ route, operation, vars }, call, query, parts, lastEventId) {
      const input = (await decodeRestRequest(route, vars, query, parts, maxBodyBytes)) as { since?: bigint };
      if (input.since === undefined && lastEventId !== undefined) {
        // An EventSource sends back the last `id:` it received; ids are revisions.
        if (!/^\d{1,15}$/.test(lastEventId.trim()))
          throw invalid([
            issueAt(
              "Last-Event-ID",
              "INVALID_TYPE",
              `Last-Event-ID must be a revision (digits), not "${lastEventId}".`,
            ),
          ]);
        input.since = BigInt(lastEventId.trim());
      }
      const result = await runOperation(operation, call, input as never);
      if (result.kind !== "events") throw new Error(`${route.method.name} answered no stream.`);
      return result.events;
    },
  };
}

/**
 * The 304 for a GET whose `If-None-Match` names the ETag of its `result`:
 * without a body, with the ETag (and Cache-Control) the 200 would have had
 * (RFC 9110 §15.4.5); undefined when it names another, or the answer has no
 * ETag (lists), which is then answered in full.
 */
function notModified(result: Result, ifNoneMatch: string): HttpAnswer | undefined {
  const headers: Record<string, string> | undefined =
    result.kind === "definition"
      ? { etag: etagOf(result.stored) }
      : result.kind === "card"
        ? { etag: result.etag, "cache-control": AGENT_CARD_CACHE_CONTROL }
        : undefined;
  if (headers?.etag === undefined || !ifNoneMatchMatches(parseEntityTags(ifNoneMatch), headers.etag)) return undefined;
  return { status: 304, headers, body: null };
}
