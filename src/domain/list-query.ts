/**
 * The list's search and paging as the registry understands them (README,
 * "Search and paging"): what a ListAgentDefinitionsRequest asks for, checked
 * and normalised into a ListQuery, and the page tokens that carry a walk from
 * one page to the next. No I/O.
 *
 * A page token is a keyset cursor: the position of the last row of a page in
 * the list's order (its seq, and its order value for updatedAt or name),
 * bound to what it was made for (tenant, filters, order) by a hash, so that a
 * token reused with another tenant, filter or order is refused instead of
 * silently paging something else. Tokens are opaque to clients (base64url of
 * a small JSON object) and not secret: they carry nothing a caller could not
 * read from the page itself.
 */
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { type Issue, invalid, issueAt, RegistryError } from "./errors.js";
import { type LivenessFilters, livenessFiltersOf } from "./liveness.js";
import { DEFINITION_STATUSES, type DefinitionStatus } from "./records.js";

/** The exact filters, by their JSON (query parameter) names. */
export type TermKind =
  | "name"
  | "provider"
  | "platform"
  | "version"
  | "tag"
  | "skillId"
  | "executionMode"
  | "resource"
  | "externalAgentID"
  /** Not a filter of the request: the words of `q` (searchWordsOf), as the storage resolves them. */
  | "word";

/** What the list shows when no status is asked for. */
export const DEFAULT_STATUSES: readonly DefinitionStatus[] = ["ACTIVE", "DEPRECATED"];

/**
 * `relevance` (issue 24): the matches of `q` by a full-text score, best first,
 * ties by creation; only with `q`, never descending.
 */
export type OrderKey = "createdAt" | "updatedAt" | "name" | "relevance";
export interface ListOrder {
  readonly key: OrderKey;
  readonly descending: boolean;
}

/** Where a page starts: after the row with this seq (and order value, for updatedAt and name). */
export interface Position {
  readonly seq: number;
  /** The row's `updated_at` as the database holds it (updatedAt), its name (name), or its score (relevance). */
  readonly value?: string;
}

/**
 * One exact filter: a definition matches when it has any of the values, or,
 * with `range`, any value from `range.from` (inclusive) to `range.below`
 * (exclusive), compared as binary strings (then `values` is empty): the last
 * word of `q` typed partly.
 */
export interface TermFilter {
  readonly kind: TermKind;
  readonly values: readonly string[];
  readonly range?: { readonly from: string; readonly below: string };
}

/** A list request, checked: every part applies (AND). */
export interface ListQuery extends LivenessFilters {
  readonly limit: number;
  readonly offset: number;
  readonly terms: readonly TermFilter[];
  /** Never empty. */
  readonly statuses: readonly DefinitionStatus[];
  /** Only definitions updated at or after it. */
  readonly updatedSince?: Date;
  /** Only each agent's newest version that is not deactivated. */
  readonly latest: boolean;
  /**
   * Words of `q` that must each be a whole word of the searchable text
   * (searchWordsOf: folded, 3 or more letters or digits), sorted; every
   * word of `q` but its last.
   */
  readonly words: readonly string[];
  /** The last word of `q`: some word of the text must begin with it. */
  readonly prefix?: string;
  readonly order: ListOrder;
  /** From the page token: the page starts after this row. */
  readonly after?: Position;
}

/**
 * The shortest word `q` searches for, and the shortest word the index holds
 * (searchWordsOf): kept from the days of MariaDB's FULLTEXT index
 * (innodb_ft_min_token_size), and it keeps "a", "of", "to" out of the term
 * index, where they would be a term row of nearly every definition.
 */
export const MIN_WORD_LENGTH = 3;

/**
 * The longest word the index holds, in code points: definition_terms.value is
 * a VARCHAR(255). Longer words are cut here, the same way in the text and in
 * `q`, so a longer word still finds itself.
 */
export const MAX_WORD_LENGTH = 255;

/**
 * The exact filters' request members (ListAgentDefinitionsRequest's and WatchAgentDefinitionsRequest's, by
 * their TS names).
 */
export interface FilterParts {
  readonly name: readonly string[];
  readonly provider: readonly string[];
  readonly platform: readonly string[];
  readonly version: readonly string[];
  readonly tag: readonly string[];
  readonly skillId: readonly string[];
  readonly executionMode: readonly string[];
  readonly resource: readonly string[];
  readonly externalAgentId: readonly string[];
  readonly status: readonly string[];
  /** `meta.liveness.state`s (issue 44): UP, DOWN, NOT_PROBED. */
  readonly liveness?: readonly string[];
  /** `meta.liveness.drift`s (issue 44): NONE, COMPATIBLE, BREAKING. */
  readonly drift?: readonly string[];
}

/**
 * Calls `add` with every exact filter's (kind, value) that `definition` is found by, in one order, empty
 * and absent values included (callers skip them): what the term index stores of it (storage's
 * searchTermsOf) and what a watch's filters test (watch.ts).
 */
export function forEachFilterValue(
  definition: AgentDefinition,
  add: (kind: Exclude<TermKind, "word">, value: string | undefined) => void,
): void {
  add("name", definition.name);
  add("provider", definition.provider?.id);
  add("platform", definition.platform?.id);
  add("version", definition.version);
  add("externalAgentID", definition.externalAgentId);
  for (const skill of definition.skills) {
    add("skillId", skill.id);
    for (const tag of skill.tags) add("tag", tag.tag);
  }
  for (const item of definition.hostConfig) {
    add("executionMode", item.executionMode?.id);
    for (const resource of item.hostResources) add("resource", resource.agentResource?.id);
  }
}

/** Calls `term` with each exact filter's kind and the values `parts` asks for it (maybe none), in one order. */
export function forEachFilterParam(
  parts: FilterParts,
  term: (kind: Exclude<TermKind, "word">, values: readonly string[]) => void,
): void {
  term("name", parts.name);
  term("provider", parts.provider);
  term("platform", parts.platform);
  term("version", parts.version);
  term("tag", parts.tag);
  term("skillId", parts.skillId);
  term("executionMode", parts.executionMode);
  term("resource", parts.resource);
  term("externalAgentID", parts.externalAgentId);
}

/** The request members a ListQuery is made from (ListAgentDefinitionsRequest's, by their TS names). */
export interface ListRequestParts extends FilterParts {
  readonly limit: number;
  readonly offset?: number | undefined;
  readonly updatedSince?: string | undefined;
  readonly latest?: boolean | undefined;
  readonly q?: string | undefined;
  readonly orderBy?: string | undefined;
  readonly pageToken?: string | undefined;
}

const rfc3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;
const orderForm = /^(?:(createdAt|updatedAt|name)( desc)?|(relevance))$/;

/** The query a list request asks for, bound to `tenant`; every problem is a 400 naming its parameter. */
export function parseListQuery(tenant: string, request: ListRequestParts): ListQuery {
  const issues: Issue[] = [];
  const terms: TermFilter[] = [];
  forEachFilterParam(request, (kind, values) => {
    if (values.length > 0) terms.push({ kind, values: [...new Set(values)].sort() });
  });

  const statuses: DefinitionStatus[] = request.status.includes("ALL")
    ? [...DEFINITION_STATUSES]
    : DEFINITION_STATUSES.filter((s) => request.status.includes(s));

  let updatedSince: Date | undefined;
  if (request.updatedSince !== undefined) {
    const instant = rfc3339.test(request.updatedSince) ? new Date(request.updatedSince.toUpperCase()) : undefined;
    if (instant === undefined || Number.isNaN(instant.getTime())) {
      issues.push(
        issueAt(
          "updatedSince",
          "INVALID_VALUE",
          `updatedSince must be an RFC 3339 date-time such as 2025-01-31T12:00:00Z, not "${request.updatedSince}".`,
        ),
      );
    } else updatedSince = instant;
  }

  let words: string[] = [];
  let prefix: string | undefined;
  if (request.q !== undefined && request.q.trim() !== "") {
    const typed = searchWordsOf(request.q);
    prefix = typed.pop();
    words = [...new Set(typed)].sort();
    if (prefix === undefined)
      issues.push(
        issueAt("q", "INVALID_VALUE", `q needs at least one word of ${MIN_WORD_LENGTH} or more letters or digits.`),
      );
  }

  let order: ListOrder = { key: "createdAt", descending: false };
  if (request.orderBy !== undefined) {
    const match = orderForm.exec(request.orderBy);
    if (match === null)
      issues.push(
        issueAt(
          "orderBy",
          "INVALID_VALUE",
          `orderBy must be createdAt, updatedAt or name, each optionally followed by " desc", or relevance ` +
            `(with q); not "${request.orderBy}".`,
        ),
      );
    else if (match[3] !== undefined) {
      // A score of the words of q: without them there is nothing to score.
      if (request.q === undefined || request.q.trim() === "")
        issues.push(
          issueAt("orderBy", "INVALID_VALUE", "orderBy=relevance needs q: it ranks the matches of q's words."),
        );
      order = { key: "relevance", descending: false };
    } else order = { key: match[1] as OrderKey, descending: match[2] !== undefined };
  }
  if (issues.length > 0) throw invalid(issues);

  const query: ListQuery = {
    limit: request.limit,
    offset: request.offset ?? 0,
    terms,
    statuses: statuses.length > 0 ? statuses : [...DEFAULT_STATUSES],
    ...(updatedSince === undefined ? {} : { updatedSince }),
    latest: request.latest === true,
    words,
    ...(prefix === undefined ? {} : { prefix }),
    order,
    ...livenessFiltersOf(request),
  };
  const after = pagePosition(request, () => listBinding(tenant, query));
  return after === undefined ? query : { ...query, after };
}

/** The list without filters, in the default order (createdAt, oldest first): what `GET {d}?limit=&offset=` asks. */
export function unfilteredQuery(limit: number, offset: number): ListQuery {
  return {
    limit,
    offset,
    terms: [],
    statuses: [...DEFAULT_STATUSES],
    latest: false,
    words: [],
    order: { key: "createdAt", descending: false },
  };
}

/**
 * Where a page starts by token: undefined without one; INVALID_PAGE_TOKEN when
 * it is combined with `offset` or not bound to `binding` (a hash, made only
 * when there is a token to check).
 */
export function pagePosition(
  request: { readonly pageToken?: string; readonly offset?: number },
  binding: () => string,
): Position | undefined {
  if (request.pageToken === undefined || request.pageToken === "") return undefined;
  if (request.offset !== undefined)
    throw invalidPageToken("pageToken cannot be combined with offset: the token already says where the page starts.");
  return readPageToken(request.pageToken, binding());
}

/** The words of a text as the keyword index holds them and as `q` is split: runs of letters and digits, lower case. */
export function wordsOf(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/**
 * The words of a text as the term index holds them (kind `word`) and as `q`
 * is split, in order, repeats kept: case and accents folded (compatibility
 * decomposition, marks dropped, lower case: "Café" and "CAFE" are "cafe",
 * "ﬁle" is "file"), then runs of letters and digits, of MIN_WORD_LENGTH or
 * more code points, each cut to MAX_WORD_LENGTH. Plain JavaScript, so both
 * databases hold and compare the same words (binary comparison).
 */
export function searchWordsOf(text: string): string[] {
  // Lower case after the decomposition (ℌ decomposes to H) and decomposed again after it (İ lowers to i
  // and a combining dot), the marks dropped last.
  const folded = text.normalize("NFKD").toLowerCase().normalize("NFKD").replace(/\p{M}/gu, "");
  const words: string[] = [];
  for (const run of folded.match(/[\p{L}\p{N}]+/gu) ?? []) {
    const points = [...run];
    if (points.length < MIN_WORD_LENGTH) continue;
    words.push(points.length > MAX_WORD_LENGTH ? points.slice(0, MAX_WORD_LENGTH).join("") : run);
  }
  return words;
}

/** What a list token is bound to: the tenant, every filter and the order; not the page size. */
export function listBinding(tenant: string, query: ListQuery): string {
  return bindingHash({
    list: tenant,
    terms: query.terms,
    statuses: [...query.statuses].sort(),
    updatedSince: query.updatedSince?.toISOString() ?? null,
    latest: query.latest,
    words: query.words,
    // Absent without q, so the tokens of lists without q stay what they were.
    ...(query.prefix === undefined ? {} : { prefix: query.prefix }),
    order: query.order,
    // Absent when not asked for, so the tokens of lists without them stay what they were.
    ...(query.liveness === undefined ? {} : { liveness: query.liveness }),
    ...(query.drift === undefined ? {} : { drift: query.drift }),
  });
}

/** What a versions token is bound to: the tenant and the agent. */
export function versionsBinding(tenant: string, agentNumber: number): string {
  return bindingHash({ versions: tenant, agent: agentNumber });
}

function bindingHash(value: unknown): string {
  return createHash("sha256").update(JSON.stringify(value)).digest("base64url").slice(0, 22);
}

/** The token of the page that starts after `position`, for a walk bound to `binding`. */
export function pageToken(binding: string, position: Position): string {
  const body: TokenBody =
    position.value === undefined ? { b: binding, s: position.seq } : { b: binding, s: position.seq, v: position.value };
  return Buffer.from(JSON.stringify(body), "utf8").toString("base64url");
}

interface TokenBody {
  /** The binding hash. */
  readonly b: string;
  /** The last row's seq. */
  readonly s: number;
  /** The last row's order value. */
  readonly v?: string;
}

/** The position a token names; INVALID_PAGE_TOKEN when it is malformed or was made for another binding. */
export function readPageToken(token: string, binding: string): Position {
  let body: unknown;
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(token)) throw new Error("not base64url");
    body = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
  } catch {
    throw invalidPageToken("pageToken is malformed; pass back a nextPageToken exactly as it was answered.");
  }
  const { b, s, v } = (typeof body === "object" && body !== null ? body : {}) as Partial<
    Record<keyof TokenBody, unknown>
  >;
  if (
    typeof b !== "string" ||
    typeof s !== "number" ||
    !Number.isSafeInteger(s) ||
    s < 0 ||
    (v !== undefined && typeof v !== "string")
  ) {
    throw invalidPageToken("pageToken is malformed; pass back a nextPageToken exactly as it was answered.");
  }
  if (b !== binding)
    throw invalidPageToken(
      "pageToken was made for another tenant, filter or order; send the same parameters as for the page it came " +
        "with, or start without it.",
    );
  return v === undefined ? { seq: s } : { seq: s, value: v };
}

/** 400 INVALID_PAGE_TOKEN on `pageToken`. */
export function invalidPageToken(message: string): RegistryError {
  return new RegistryError("INVALID_PAGE_TOKEN", message, [issueAt("pageToken", "INVALID_PAGE_TOKEN", message)]);
}
