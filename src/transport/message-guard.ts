import { type DescMethod, fromBinary, type JsonValue } from "@bufbuild/protobuf";
import { type ConnectRouter, type ContextValues, type Interceptor, createContextKey, createContextValues } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest } from "@connectrpc/connect/protocol";
import { type Issue, RegistryError, invalid } from "../domain/errors.js";
import { concatBytes } from "./bytes.js";
import { toConnectError } from "./error-mapping.js";
import { decodeJsonMessage } from "./rest/json-decode.js";
import { buildRouteTable } from "./rest/route-table.js";
import { structureIssues } from "./strict-json.js";

export interface MessageGuardOptions {
  /** Largest request message accepted, in bytes (the RPCs' readMaxBytes). */
  readonly maxBodyBytes: number;
}

/** What the guard found wrong with a request message, for the interceptor to raise. */
const MESSAGE_PROBLEM = createContextKey<RegistryError | undefined>(undefined);

/** Raises the guard's finding from inside the RPC, so Connect encodes it for the request's own protocol. */
const problemInterceptor: Interceptor = (next) => async (req) => {
  const problem = req.contextValues.get(MESSAGE_PROBLEM);
  if (problem !== undefined) throw toConnectError(problem);
  return next(req);
};

/** The request message's encoding, from its content type; undefined for anything the guard leaves alone. */
function formatOf(contentType: string): { binary: boolean; enveloped: boolean } | undefined {
  const type = (contentType.split(";")[0] ?? "").trim().toLowerCase();
  switch (type) {
    case "application/json":
      return { binary: false, enveloped: false };
    case "application/proto":
      return { binary: true, enveloped: false };
    case "application/grpc":
    case "application/grpc+proto":
    case "application/grpc-web":
    case "application/grpc-web+proto":
      return { binary: true, enveloped: true };
    case "application/grpc+json":
    case "application/grpc-web+json":
      return { binary: false, enveloped: true };
    default:
      return undefined;
  }
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
const encoder = new TextEncoder();

function envelope(data: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + data.byteLength);
  new DataView(out.buffer).setUint32(1, data.byteLength);
  out.set(data, 5);
  return out;
}

/** The data of the one uncompressed envelope of a unary request; undefined for anything else (Connect then decides). */
function unenvelope(bytes: Uint8Array): Uint8Array | undefined {
  if (bytes.byteLength < 5 || bytes[0] !== 0) return undefined;
  const length = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(1);
  return bytes.byteLength === 5 + length ? bytes.subarray(5) : undefined;
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

// biome-ignore lint/correctness/useYield: an iterable that fails when read
async function* failing(err: unknown): AsyncIterable<Uint8Array> {
  throw err;
}

async function* replay(head: Uint8Array[], rest: AsyncIterator<Uint8Array>): AsyncIterable<Uint8Array> {
  yield* head;
  for (let next = await rest.next(); next.done !== true; next = await rest.next()) yield next.value;
}

/**
 * Every unary RPC message decoded and checked before Connect sees it, on
 * every surface (gRPC, gRPC-Web, Connect; JSON and binary), so a malformed
 * message is a 400 / INVALID_ARGUMENT with the registry's error detail:
 *
 * - JSON: invalid UTF-8, a member given twice (JSON.parse keeps the last),
 *   nesting beyond MAX_JSON_DEPTH, unknown members and wrong types (each with
 *   its path), as REST reports them; proto names are accepted too.
 * - binary: a message protobuf-es cannot decode (broken wire format, invalid
 *   UTF-8 in a string), which Connect itself would answer as INTERNAL.
 * - a declared Content-Length over the limit: PAYLOAD_TOO_LARGE.
 *
 * A bad message is replaced by an empty one and the problem is raised by an
 * interceptor, so Connect encodes the error for the request's own protocol.
 * Compressed messages are left to Connect.
 */
export function withMessageGuard(routes: (router: ConnectRouter) => void, { maxBodyBytes }: MessageGuardOptions): (router: ConnectRouter) => void {
  return (router) => {
    const guardFrom = (start: number): void => {
      const handlers = router.handlers;
      for (let i = start; i < handlers.length; i++) {
        const handler = handlers[i] as UniversalHandler;
        if (handler.method.methodKind === "unary") handlers[i] = guarded(handler, maxBodyBytes);
      }
    };
    const wrapped: ConnectRouter = {
      get handlers() {
        return router.handlers;
      },
      service(service, implementation, options) {
        const start = router.handlers.length;
        router.service(service, implementation, { ...options, interceptors: [...(options?.interceptors ?? []), problemInterceptor] });
        guardFrom(start);
        return wrapped;
      },
      rpc(method, implementation, options) {
        const start = router.handlers.length;
        router.rpc(method, implementation, { ...options, interceptors: [...(options?.interceptors ?? []), problemInterceptor] });
        guardFrom(start);
        return wrapped;
      },
    };
    routes(wrapped);
  };
}

/** Issues inside an RPC's REST body field are given relative to it, as the service gives them. */
function bodyPrefixOf(method: DescMethod): string | undefined {
  const [route] = buildRouteTable([method.parent]).filter((r) => r.method === method);
  const field = route === undefined ? undefined : method.input.fields.find((f) => f.name === route.body);
  return field === undefined ? undefined : `${field.jsonName}.`;
}

function guarded(handler: UniversalHandler, maxBodyBytes: number): UniversalHandler {
  const method = handler.method;
  const prefix = bodyPrefixOf(method);
  const relative = (issues: readonly Issue[]): Issue[] =>
    prefix === undefined ? [...issues] : issues.map((i) => (i.path?.startsWith(prefix) ? { ...i, path: i.path.slice(prefix.length), message: i.message.replace(prefix, "") } : i));
  const refuse = (issues: readonly Issue[], message: string): RegistryError => invalid(relative(issues), message);

  /** The problem with a whole message, or undefined. */
  const check = (data: Uint8Array, binary: boolean): RegistryError | undefined => {
    if (binary) {
      try {
        fromBinary(method.input, data);
        return undefined;
      } catch (err) {
        const message = `The protobuf message cannot be decoded: ${err instanceof Error ? err.message : String(err)}.`;
        return refuse([{ code: "MALFORMED_PROTOBUF", message }], message);
      }
    }
    let text: string;
    try {
      text = strictUtf8.decode(data);
    } catch {
      return refuse([{ code: "MALFORMED_JSON", message: "The body is not valid UTF-8." }], "The body is not valid UTF-8.");
    }
    const structural = structureIssues(text);
    if (structural.length > 0) return refuse(structural, structural.length === 1 ? (structural[0] as Issue).message : `The JSON has ${structural.length} problems.`);
    let value: JsonValue;
    try {
      value = JSON.parse(text) as JsonValue;
    } catch (err) {
      const message = `The body is not valid JSON: ${err instanceof SyntaxError ? err.message : "invalid JSON"}.`;
      return refuse([{ code: "MALFORMED_JSON", message }], message);
    }
    const { issues } = decodeJsonMessage(method.input, value, "", { protoNames: true });
    if (issues.length === 0) return undefined;
    return refuse(issues, issues.length === 1 ? "The request has 1 invalid member." : `The request has ${issues.length} invalid members.`);
  };

  const withProblem = (req: UniversalServerRequest, problem: RegistryError, body: AsyncIterable<Uint8Array>, header = new Headers(req.header)): UniversalServerRequest => {
    const contextValues: ContextValues = req.contextValues ?? createContextValues();
    contextValues.set(MESSAGE_PROBLEM, problem);
    header.delete("content-length");
    return { ...req, header, body, contextValues };
  };

  const guard = async (req: UniversalServerRequest): Promise<UniversalServerRequest> => {
    if (req.method === "GET") return guardQuery(req);
    const format = formatOf(req.header.get("content-type") ?? "");
    const encoding = req.header.get(format?.enveloped ? "grpc-encoding" : "content-encoding");
    if (format === undefined || (encoding !== null && encoding !== "identity")) return req;
    if (typeof req.body !== "object" || req.body === null || !(Symbol.asyncIterator in req.body)) return req;
    const empty = encoder.encode(format.binary ? "" : "{}");
    const emptyBody = format.enveloped ? envelope(empty) : empty;
    const overhead = format.enveloped ? 5 : 0;
    if (Number(req.header.get("content-length") ?? 0) > maxBodyBytes + overhead) return withProblem(req, tooLarge(maxBodyBytes), once(emptyBody));
    // Read the whole message; past the limit (a body without a length) hand what was read and the rest to Connect, whose limit answers.
    const iterator = (req.body as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
    const chunks: Uint8Array[] = [];
    let size = 0;
    try {
      for (let next = await iterator.next(); next.done !== true; next = await iterator.next()) {
        chunks.push(next.value);
        size += next.value.byteLength;
        if (size > maxBodyBytes + overhead) return { ...req, body: replay(chunks, iterator) };
      }
    } catch (err) {
      // The client went away mid-body: Connect meets the same failure where it would have.
      return { ...req, body: failing(err) };
    }
    const bytes = concatBytes(chunks, size);
    const data = format.enveloped ? unenvelope(bytes) : bytes;
    const problem = data === undefined ? undefined : check(data, format.binary);
    return problem === undefined ? { ...req, body: once(bytes) } : withProblem(req, problem, once(emptyBody));
  };

  /** Connect's GET requests carry the message in the query. */
  const guardQuery = (req: UniversalServerRequest): UniversalServerRequest => {
    const url = new URL(req.url);
    const message = url.searchParams.get("message");
    const binary = url.searchParams.get("encoding") === "proto";
    if (message === null || url.searchParams.has("compression")) return req;
    const base64 = url.searchParams.get("base64") === "1";
    const data = base64 ? fromBase64Url(message) : encoder.encode(message);
    const problem = check(data, binary);
    if (problem === undefined) return req;
    url.searchParams.set("message", binary ? "" : "{}");
    url.searchParams.delete("base64");
    return { ...withProblem(req, problem, once(new Uint8Array())), url: url.toString() };
  };

  const run = async (req: UniversalServerRequest) => handler(await guard(req));
  return Object.assign(run, {
    protocolNames: handler.protocolNames,
    service: handler.service,
    method: handler.method,
    requestPath: handler.requestPath,
    supportedContentType: handler.supportedContentType,
    allowedMethods: handler.allowedMethods,
  });
}

/** Base64url (or standard base64), padded or not; what cannot be decoded is taken as no bytes, which fails the check below. */
function fromBase64Url(text: string): Uint8Array {
  try {
    const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "").padEnd(Math.ceil(text.length / 4) * 4, "="));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  } catch {
    return new Uint8Array([0xff]);
  }
}

function tooLarge(limit: number): RegistryError {
  const message = `The request body is larger than ${limit} bytes.`;
  return new RegistryError("too_large", "PAYLOAD_TOO_LARGE", message, [{ code: "PAYLOAD_TOO_LARGE", message }]);
}
