/**
 * REST response writing: an operation's result as the JSON the contract's
 * REST clients read (encoding/result-json.ts: a stored definition as its stored JSON bytes with the registry's
 * `meta` spliced in, a page of them joined), with the headers REST adds: a definition's `ETag`, a write's
 * `Location`, a read's revision, a card's `Cache-Control`.
 */
import type { DescMessage } from "@bufbuild/protobuf";
import { AGENT_CARD_CACHE_CONTROL } from "../../domain/agent-card.js";
import { etagOf, ifNoneMatchMatches, parseEntityTags } from "../../domain/lifecycle.js";
import type { StoredDefinition } from "../../domain/records.js";
import { type HttpAnswer, JSON_CONTENT_TYPE, REVISION_HEADER } from "../../http/http-answer.js";
import type { Result } from "../../operations/operation.js";
import { jsonWithMeta } from "../encoding/definition-meta.js";
import { jsonMediaType, resultJson } from "../encoding/result-json.js";

const JSON_HEADERS = { "content-type": JSON_CONTENT_TYPE };

/** One definition: its stored JSON with `meta`, and its `ETag`. */
function definitionAnswer(
  status: number,
  stored: StoredDefinition,
  headers: Readonly<Record<string, string>> = {},
): HttpAnswer {
  return { status, headers: { ...JSON_HEADERS, etag: etagOf(stored), ...headers }, body: jsonWithMeta(stored) };
}

/**
 * The REST answer for `result` of an RPC whose response is `output`. A write
 * that creates (route-table.ts's createsOf) answers 201, with the instance's `Location` (the path it was posted
 * to, plus its id) for a definition; the others answer 200. Every definition
 * carries its `meta`; an answer about one definition, its `ETag`.
 */
export function restAnswer(result: Result, output: DescMessage, creates: boolean, pathname: string): HttpAnswer {
  const status = creates ? 201 : 200;
  switch (result.kind) {
    case "definition": {
      if (status === 200)
        return definitionAnswer(
          status,
          result.stored,
          result.revision === undefined ? {} : { [REVISION_HEADER]: String(result.revision) },
        );
      const location = `${pathname.replace(/\/+$/, "")}/${encodeURIComponent(result.stored.id)}`;
      return definitionAnswer(status, result.stored, { location });
    }
    case "page": {
      // A status change of one version, named by its id, answers that version, like GET (README, "Lifecycle").
      const [only] = result.page.data;
      if (result.one === true && only !== undefined) return definitionAnswer(status, only);
      const { revision } = result.page;
      return {
        status,
        headers: revision === undefined ? JSON_HEADERS : { ...JSON_HEADERS, [REVISION_HEADER]: String(revision) },
        body: resultJson(result, output),
      };
    }
    case "message": {
      // JSON (with its charset), or the media type a standard names for its document (an AI Catalog's).
      const type = jsonMediaType(output);
      const headers = type === "application/json" ? JSON_HEADERS : { "content-type": type };
      return { status, headers, body: resultJson(result, output) };
    }
    case "card":
      // A2A v1.0 asks agent card endpoints for Cache-Control and an ETag.
      return {
        status,
        headers: { ...JSON_HEADERS, etag: result.etag, "cache-control": AGENT_CARD_CACHE_CONTROL },
        body: resultJson(result, output),
      };
    case "events":
      throw new Error("A stream is answered as Server-Sent Events by the edge, not as one answer.");
  }
}

/**
 * The 304 for a GET whose `If-None-Match` names the ETag of its `result`:
 * without a body, with the ETag (and Cache-Control) the 200 would have had
 * (RFC 9110 §15.4.5); undefined when it names another, or the answer has no
 * ETag (lists), which is then answered in full.
 */
export function notModified(result: Result, ifNoneMatch: string): HttpAnswer | undefined {
  const headers: Record<string, string> | undefined =
    result.kind === "definition"
      ? { etag: etagOf(result.stored) }
      : result.kind === "card"
        ? { etag: result.etag, "cache-control": AGENT_CARD_CACHE_CONTROL }
        : undefined;
  if (headers?.etag === undefined || !ifNoneMatchMatches(parseEntityTags(ifNoneMatch), headers.etag)) return undefined;
  return { status: 304, headers, body: null };
}
