import { create, type DescMessage, type DescMethodUnary, type DescService, type JsonObject, ScalarType, toJson } from "@bufbuild/protobuf";
import { ConnectError, type ConnectRouter, type ContextValues } from "@connectrpc/connect";
import { type Issue, RegistryError, invalid, issueAt } from "../../domain/errors.js";
import type { Logger } from "../../logger.js";
import type { AccessCheck } from "../auth-interceptor.js";
import { asConnectError, restError, statusOfKind, toConnectError } from "../error-mapping.js";
import { mediaTypeOf, multipartJson, parseJson, readBody } from "./body.js";
import { recordOf } from "../../observability/request-record.js";
import { createInProcessTransport } from "./in-process-transport.js";
import { decodeJsonMessage } from "./json-decode.js";
import { type RestRoute, buildRouteTable, matchRoute } from "./route-table.js";

export interface RestHandlerOptions {
  readonly services: readonly DescService[];
  readonly routes: (router: ConnectRouter) => void;
  readonly logger: Logger;
  /** Largest request body accepted, in bytes. */
  readonly maxBodyBytes: number;
  /**
   * The access check the RPCs run, run here too before a body is read, so an
   * unauthenticated or unauthorized caller gets 401/403, not a verdict on its
   * body, and cannot make the service read one.
   */
  readonly accessCheck: AccessCheck;
}

/** Request headers handed on to the RPC: credentials and correlation, nothing else. */
const FORWARDED_HEADERS = ["authorization", "x-request-id"];

const JSON_HEADERS = { "content-type": "application/json; charset=utf-8" };

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { ...JSON_HEADERS, ...headers } });
}

/** A RegistryError raised by REST itself (media type, body size, JSON): its kind says the status. */
function errorResponse(err: RegistryError): Response {
  const status = statusOfKind(err.kind);
  const { body, headers } = restError(toConnectError(err), status);
  return json(status, body, headers);
}

/** Sets path variables and query parameters on the request, reporting every bad one. */
function fieldsFromUrl(route: RestRoute, vars: Map<string, string>, query: URLSearchParams, bound: Set<string>, init: Record<string, unknown>): Issue[] {
  const issues: Issue[] = [];
  for (const [name, raw] of vars) {
    const field = route.method.input.fields.find((f) => f.name === name);
    if (field === undefined) continue;
    bound.add(field.name);
    try {
      init[field.localName] = decodeURIComponent(raw);
    } catch {
      issues.push(issueAt(field.jsonName, "INVALID_VALUE", `The path segment for ${field.jsonName} is not valid percent-encoding.`));
    }
  }
  for (const [key, value] of query) {
    const field = route.method.input.fields.find((f) => f.jsonName === key || f.name === key);
    if (field === undefined || bound.has(field.name) || field.fieldKind !== "scalar") {
      issues.push({ code: "UNKNOWN_FIELD", message: `Query parameter "${key}" is not accepted here.`, field: key, path: key });
      continue;
    }
    bound.add(field.name);
    if (field.scalar === ScalarType.INT32) {
      if (!/^-?\d{1,10}$/.test(value)) {
        issues.push(issueAt(field.jsonName, "INVALID_TYPE", `${field.jsonName} must be an integer, not "${value}".`));
        continue;
      }
      init[field.localName] = Number(value);
    } else {
      init[field.localName] = value;
    }
  }
  return issues;
}

/**
 * The REST surface: each `google.api.http` binding decoded in a fixed order
 * (body, then path variables, then query parameters for the remaining
 * fields), then called through an in-process Connect transport so that REST
 * runs the very interceptors and handlers that gRPC and Connect run.
 *
 * Returns a fetch-style handler that answers `undefined` for paths outside
 * the REST surface, so a host can fall through to its other routes.
 */
export function createRestHandler({ services, routes, logger, maxBodyBytes, accessCheck }: RestHandlerOptions) {
  const table = buildRouteTable(services);
  // The caller's context values (the edge's request record) go with the in-process call.
  const transportWith = createInProcessTransport(routes);

  async function decodeBody(route: RestRoute, request: Request, init: Record<string, unknown>, bound: Set<string>): Promise<void> {
    const field = route.method.input.fields.find((f) => f.name === route.body);
    const target: DescMessage | undefined = route.body === "*" ? route.method.input : field?.fieldKind === "message" ? field.message : undefined;
    if (target === undefined) throw new Error(`body field ${route.body} of ${route.method.name} must be a message`);
    const mediaType = mediaTypeOf(request);
    const partName = field?.jsonName ?? "body";
    let value: unknown;
    if (mediaType === "application/json") {
      value = parseJson(await readBody(request, maxBodyBytes), partName);
    } else if (mediaType === "multipart/form-data") {
      value = await multipartJson(request, await readBody(request, maxBodyBytes), partName);
    } else {
      const message = `Send the definition as application/json, or as multipart/form-data with the part "${partName}"${mediaType ? `, not ${mediaType}` : ""}.`;
      throw new RegistryError("unsupported_media_type", "UNSUPPORTED_MEDIA_TYPE", message, [{ code: "UNSUPPORTED_MEDIA_TYPE", message, field: "Content-Type" }]);
    }
    const decoded = decodeJsonMessage(target, value);
    if (decoded.message === undefined) throw invalid(decoded.issues);
    if (route.body === "*") {
      // The whole request comes from the body: no field is left for the query.
      Object.assign(init, decoded.message);
      for (const f of route.method.input.fields) bound.add(f.name);
    } else if (field !== undefined) {
      init[field.localName] = decoded.message;
      bound.add(field.name);
    }
  }

  async function call(route: RestRoute, vars: Map<string, string>, request: Request, url: URL, values: ContextValues | undefined): Promise<Response> {
    const init: Record<string, unknown> = {};
    const bound = new Set<string>();
    if (route.body !== "") {
      await accessCheck(request.headers.get("authorization"), route.method);
      await decodeBody(route, request, init, bound);
    }
    const issues = fieldsFromUrl(route, vars, url.searchParams, bound, init);
    if (issues.length > 0) throw invalid(issues);
    const header = new Headers();
    for (const name of FORWARDED_HEADERS) {
      const value = request.headers.get(name);
      if (value !== null) header.set(name, value);
    }
    const method = route.method as DescMethodUnary;
    const response = await transportWith(values).unary(method, request.signal, undefined, header, create(method.input, init));
    const body = toJson(method.output, response.message) as JsonObject;
    if (method.output.typeName.endsWith("Response")) withTopLevelDefaults(method.output, body);
    if (route.verb !== "POST") return json(200, body);
    const id = typeof body.id === "string" ? body.id : "";
    return json(201, body, id ? { location: `${url.pathname.replace(/\/+$/, "")}/${encodeURIComponent(id)}` } : {});
  }

  return async function handleRest(request: Request, values?: ContextValues): Promise<Response | undefined> {
    const url = new URL(request.url);
    const parts = url.pathname.replace(/^\/+/, "").split("/");
    let allowed: string[] = [];
    for (const route of table) {
      const vars = matchRoute(route, parts);
      if (vars === undefined) continue;
      const record = recordOf(values);
      if (record !== undefined) record.protocol = "rest";
      if (route.verb !== request.method) {
        allowed.push(route.verb);
        continue;
      }
      if (record !== undefined) record.rpc = `${route.method.parent.typeName}/${route.method.name}`;
      try {
        return await call(route, vars, request, url, values);
      } catch (err) {
        if (err instanceof RegistryError) return errorResponse(err);
        const { status, body, headers } = restError(err instanceof ConnectError ? err : asConnectError(err, logger, route.method.name));
        return json(status, body, headers);
      }
    }
    if (allowed.length > 0) {
      allowed = [...new Set(allowed)];
      const message = `${request.method} is not allowed here; use ${allowed.join(" or ")}.`;
      return json(405, { error: message, errors: [{ error: message, code: "METHOD_NOT_ALLOWED" }] }, { allow: allowed.join(", ") });
    }
    return undefined;
  };
}

/**
 * A wrapper response (a list) shows each of its own members even when zero or
 * empty (`{"total": 0, "data": []}`); the definitions inside keep protobuf
 * JSON's rule of leaving unset members out, so they read back as sent.
 */
function withTopLevelDefaults(desc: DescMessage, body: JsonObject): void {
  for (const field of desc.fields) {
    if (body[field.jsonName] !== undefined) continue;
    if (field.fieldKind === "list") body[field.jsonName] = [];
    else if (field.fieldKind === "scalar") body[field.jsonName] = field.scalar === ScalarType.STRING ? "" : field.scalar === ScalarType.BOOL ? false : 0;
  }
}

/** The 404 answer for a path that is not part of the REST surface. */
export function notFoundResponse(pathname: string): Response {
  const message = `No resource at ${pathname}.`;
  return json(404, { error: message, errors: [{ error: message, code: "NOT_FOUND" }] });
}
