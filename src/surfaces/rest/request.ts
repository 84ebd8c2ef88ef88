/**
 * REST request decoding: the RPC's input message from a REST request, in a
 * fixed order (grpc-gateway's): the body, then path variables, then query
 * parameters for the fields left. The body is read once, parsed once and
 * decoded once, straight into the input message.
 */
import { create, type DescField, type DescMessage, type Message, ScalarType } from "@bufbuild/protobuf";
import { createIssueCollector, type Issue, invalid, issueAt, RegistryError, tooLarge } from "../../domain/errors.js";
import { parseEntityTags } from "../../domain/lifecycle.js";
import { checkJsonBody, messageOfCheckedJson } from "../encoding/body-check.js";
import { concatBytes } from "../encoding/bytes.js";
import { int32RangeIssue } from "../encoding/json-members.js";
import { multipartPartBytes } from "./multipart-bytes.js";
import type { RestRoute } from "./route-table.js";

/** What decoding needs of a request, whichever runtime received it. */
export interface RestRequestParts {
  /** The media type of the body, without parameters, lower case ("" when absent). */
  readonly mediaType: string;
  /** The whole Content-Type header, for multipart's boundary. */
  readonly contentType: string;
  /** The declared Content-Length, if any. */
  readonly contentLength: number | undefined;
  readonly body: AsyncIterable<Uint8Array>;
  /** The `If-Match` header, if any: the `etag` of a conditional write. */
  readonly ifMatch?: string | undefined;
  /** The `If-None-Match` header, if any: `*` makes a POST create-only; a GET with a matching one answers 304. */
  readonly ifNoneMatch?: string | undefined;
}

/**
 * Request fields REST takes from a header, never from the query: AIP-154's
 * `etag` is HTTP's `If-Match`, and `create_only` is `If-None-Match: *`.
 */
export const HEADER_FIELDS: Readonly<Record<string, string>> = { etag: "If-Match", create_only: "If-None-Match" };

/** A conditional header's issue: it is named as the field, since REST takes these fields from it. */
const headerIssue = (header: string, message: string): Issue => ({
  code: "INVALID_VALUE",
  message,
  field: header,
  path: header,
});

/**
 * Sets the header-bound fields of the route's input from the request's
 * conditional headers, strictly: a header that is present says something, so
 * an empty `If-Match` (a client's unset variable) is not taken for no
 * condition, and a write that takes no such condition refuses the header
 * rather than ignore it (`If-None-Match` on PUT and PATCH). GETs use
 * `If-None-Match` for 304 (unary.ts notModified) and ignore `If-Match`.
 */
function fieldsFromHeaders(
  route: RestRoute,
  parts: RestRequestParts,
  bound: Set<string>,
  init: Record<string, unknown>,
): Issue[] {
  const issues: Issue[] = [];
  const fields = route.method.input.fields.filter((f) => HEADER_FIELDS[f.name] !== undefined);
  for (const field of fields) bound.add(field.name);
  const etag = fields.find((f) => f.name === "etag");
  const createOnly = fields.find((f) => f.name === "create_only");
  const write = route.verb !== "GET";
  if (parts.ifMatch !== undefined) {
    const tags = parseEntityTags(parts.ifMatch);
    if (etag === undefined) {
      if (write) issues.push(headerIssue("If-Match", `${route.method.name} takes no If-Match; leave the header out.`));
    } else if (tags !== "*" && tags.length === 0) {
      issues.push(
        headerIssue(
          "If-Match",
          "If-Match is empty: send the ETag the write must match (meta.etag), or *, or leave the header out.",
        ),
      );
    } else {
      init[etag.localName] = parts.ifMatch;
    }
  }
  if (parts.ifNoneMatch !== undefined && write) {
    if (createOnly === undefined) {
      issues.push(
        headerIssue(
          "If-None-Match",
          `${route.method.name} takes no If-None-Match: it changes what exists; use If-Match for a conditional write.`,
        ),
      );
    } else if (parseEntityTags(parts.ifNoneMatch) === "*") {
      init[createOnly.localName] = true;
    } else {
      issues.push(headerIssue("If-None-Match", "If-None-Match on a write takes only *: create only."));
    }
  }
  return issues;
}

/** Reads at most `limit` bytes of a body; a longer one is refused with 413 before it is all read. */
export async function readBody(parts: RestRequestParts, limit: number): Promise<Uint8Array<ArrayBuffer>> {
  if (parts.contentLength !== undefined && parts.contentLength > limit) throw tooLarge(limit);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of parts.body) {
    size += chunk.byteLength;
    if (size > limit) throw tooLarge(limit);
    chunks.push(chunk);
  }
  return concatBytes(chunks, size);
}

/** The media type of a Content-Type header value without parameters, lower case ("" when absent). */
export function mediaTypeOf(contentType: string | undefined): string {
  return (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

/**
 * The bytes of the `part` of a multipart/form-data body, sent as a field or a
 * file. Other parts are refused by name, so nothing is silently dropped.
 */
export async function multipartPart(
  contentType: string,
  bytes: Uint8Array<ArrayBuffer>,
  part: string,
): Promise<Uint8Array> {
  let form: FormData;
  try {
    form = await new Response(bytes, { headers: { "content-type": contentType } }).formData();
  } catch {
    const message = "The body is not valid multipart/form-data.";
    throw invalid([{ code: "MALFORMED_MULTIPART", message }], message);
  }
  const extra = createIssueCollector();
  for (const k of form.keys()) {
    if (k !== part)
      extra.add(() => ({
        code: "UNKNOWN_FIELD",
        message: `Part "${k}" is not part of the contract; send the definition as part "${part}".`,
        field: k,
        path: k,
      }));
  }
  if (extra.count > 0) throw invalid(extra.issues(), "The multipart body has unknown parts.");
  const values = form.getAll(part);
  if (values.length !== 1) {
    const message =
      values.length === 0
        ? `The multipart body needs the part "${part}".`
        : `The multipart body has ${values.length} parts "${part}"; send one.`;
    throw invalid([issueAt(part, "REQUIRED", message)], message);
  }
  const value = values[0] as FormDataEntryValue;
  if (typeof value !== "string") return new Uint8Array(await value.arrayBuffer());
  // A part without a filename comes decoded, a byte sequence that is not UTF-8 as U+FFFD: where one shows, the
  // bytes as sent are checked instead, as a JSON body's are (multipart-bytes.ts).
  if (!value.includes("\uFFFD")) return new TextEncoder().encode(value);
  const sent = multipartPartBytes(contentType, bytes, part);
  if (sent === undefined) {
    const message = `The part "${part}" of the multipart body cannot be read as it was sent.`;
    throw invalid([issueAt(part, "MALFORMED_MULTIPART", message)], message);
  }
  return sent;
}

/**
 * The message the body holds, or the request's own fields when the body is `*`: read, then through the one
 * body check.
 */
async function decodeBody(route: RestRoute, parts: RestRequestParts, maxBodyBytes: number): Promise<Message> {
  const field = route.method.input.fields.find((f) => f.name === route.body);
  const target: DescMessage | undefined =
    route.body === "*" ? route.method.input : field?.fieldKind === "message" ? field.message : undefined;
  if (target === undefined) throw new Error(`body field ${route.body} of ${route.method.name} must be a message`);
  const partName = field?.jsonName ?? "body";
  let bytes: Uint8Array;
  if (parts.mediaType === "application/json") {
    bytes = await readBody(parts, maxBodyBytes);
  } else if (parts.mediaType === "multipart/form-data") {
    bytes = await multipartPart(parts.contentType, await readBody(parts, maxBodyBytes), partName);
  } else {
    const what = field === undefined ? "the request body" : `the body (${partName})`;
    const message =
      `Send ${what} as application/json, or as multipart/form-data with the part "${partName}"` +
      `${parts.mediaType ? `, not ${parts.mediaType}` : ""}.`;
    throw new RegistryError("UNSUPPORTED_MEDIA_TYPE", message, [
      { code: "UNSUPPORTED_MEDIA_TYPE", message, field: "Content-Type" },
    ]);
  }
  // The body is the body field's message itself: its issues' paths are relative to it already.
  const checked = checkJsonBody(bytes, target, { sentAs: partName });
  if (checked.problem !== undefined) throw checked.problem;
  return messageOfCheckedJson(target, checked.value);
}

/** A query parameter's value as its scalar field takes it, or the issue with it. */
function scalarFromQuery(
  field: DescField & { fieldKind: "scalar" },
  value: string,
): { value: unknown } | { issue: Issue } {
  const { jsonName } = field;
  switch (field.scalar) {
    case ScalarType.BOOL:
      if (value !== "true" && value !== "false")
        return { issue: issueAt(jsonName, "INVALID_TYPE", `${jsonName} must be true or false, not "${value}".`) };
      return { value: value === "true" };
    case ScalarType.INT32: {
      if (!/^-?\d+$/.test(value))
        return { issue: issueAt(jsonName, "INVALID_TYPE", `${jsonName} must be an integer, not "${value}".`) };
      // Ten digits can still overflow an int32, which would fail deep inside encoding as a 500.
      const range = int32RangeIssue(Number(value), jsonName);
      return range !== undefined ? { issue: range } : { value: Number(value) };
    }
    case ScalarType.INT64:
      // The watch's `since`: a revision, at most 18 digits so that it is a safe integer's text.
      if (!/^\d{1,15}$/.test(value))
        return { issue: issueAt(jsonName, "INVALID_TYPE", `${jsonName} must be a revision (digits), not "${value}".`) };
      return { value: BigInt(value) };
    default:
      return { value };
  }
}

/** Sets path variables and query parameters on the request, reporting every bad one. */
function fieldsFromUrl(
  route: RestRoute,
  vars: ReadonlyMap<string, string>,
  query: URLSearchParams,
  bound: Set<string>,
  init: Record<string, unknown>,
): Issue[] {
  const issues: Issue[] = [];
  for (const [name, raw] of vars) {
    const field = route.method.input.fields.find((f) => f.name === name);
    if (field === undefined) continue;
    bound.add(field.name);
    try {
      init[field.localName] = decodeURIComponent(raw);
    } catch {
      issues.push(
        issueAt(
          field.jsonName,
          "INVALID_VALUE",
          `The path segment for ${field.jsonName} is not valid percent-encoding.`,
        ),
      );
    }
  }
  const lists = new Set<string>();
  for (const [key, value] of query) {
    const field = route.method.input.fields.find((f) => f.jsonName === key || f.name === key);
    // A repeated string field takes the parameter any number of times, each value an item (grpc-gateway's rule).
    if (
      field?.fieldKind === "list" &&
      field.listKind === "scalar" &&
      field.scalar === ScalarType.STRING &&
      (!bound.has(field.name) || lists.has(field.name))
    ) {
      bound.add(field.name);
      lists.add(field.name);
      ((init[field.localName] ??= []) as string[]).push(value);
      continue;
    }
    if (field === undefined || bound.has(field.name) || field.fieldKind !== "scalar") {
      issues.push({
        code: "UNKNOWN_FIELD",
        message: `Query parameter "${key}" is not accepted here.`,
        field: key,
        path: key,
      });
      continue;
    }
    bound.add(field.name);
    const parsed = scalarFromQuery(field, value);
    if ("issue" in parsed) issues.push(parsed.issue);
    else init[field.localName] = parsed.value;
  }
  return issues;
}

/**
 * The RPC's input message for a REST request: body, then path variables,
 * then query parameters. Every problem is a RegistryError naming its field.
 */
export async function decodeRestRequest(
  route: RestRoute,
  vars: ReadonlyMap<string, string>,
  query: URLSearchParams,
  parts: RestRequestParts,
  maxBodyBytes: number,
): Promise<Message> {
  const init: Record<string, unknown> = {};
  const bound = new Set<string>();
  if (route.body !== "") {
    const message = await decodeBody(route, parts, maxBodyBytes);
    if (route.body === "*") {
      // The whole request comes from the body: no field is left for the query.
      Object.assign(init, message);
      for (const f of route.method.input.fields) bound.add(f.name);
    } else {
      const field = route.method.input.fields.find((f) => f.name === route.body);
      if (field !== undefined) {
        init[field.localName] = message;
        bound.add(field.name);
      }
    }
  }
  const issues = [...fieldsFromHeaders(route, parts, bound, init), ...fieldsFromUrl(route, vars, query, bound, init)];
  if (issues.length > 0) throw invalid(issues);
  return create(route.method.input, init);
}
