import type { ListQuery, TermFilter } from "../../domain/list-query.js";
import { toDatabaseTimestamp } from "../rows.js";
import type { Dialect } from "../run/connection.js";
import { livenessMatch } from "./liveness.js";
import { pageStatement } from "./pages.js";
import type { ReadBinding } from "./reads.js";
import { TERM_KINDS } from "./search-index.js";
import { SEARCH_ALIVE } from "./sql-functions.js";
import { Sql, type Statement } from "./sql-text.js";
import { resolveWords } from "./words.js";

export type { SearchRow } from "./pages.js";
export { buildVersions, documentBytes, inSearchOrder, orderValueOf } from "./pages.js";
export type { Statement } from "./sql-text.js";
export type { WordPlan } from "./words.js";
export { needsWordPlan, pastPrefix, planWords, resolveWords, wordPlanOf } from "./words.js";

/**
 * Whether `query`'s statement costs about a page whatever the tenant holds
 * (its words resolved, resolveWords: a word of `q` is a filter like a tag):
 * no updatedSince, and either no filter (each order has its
 * index and the total its counters) or one filter whose total the counters
 * answer, in creation order (its index range is in seq order). The statuses
 * asked for must include ACTIVE: the page skips index entries of other
 * statuses, and a rare status alone (DEACTIVATED) could skip most of the
 * tenant. Everything else reads or counts every match, and waits at the gate.
 */
export function isBounded(asked: ListQuery): boolean {
  const query = resolveWords(asked);
  // Relevance scores every match of the words before it knows the page's first row.
  if (query.order.key === "relevance") return false;
  if (query.updatedSince !== undefined || !query.statuses.includes("ACTIVE")) return false;
  // Liveness is no term: its filters read every match's liveness row.
  if (query.liveness !== undefined || query.drift !== undefined) return false;
  const [only, ...more] = query.terms;
  return only === undefined || (more.length === 0 && countable(only) && query.order.key === "createdAt");
}

/**
 * PAGE_MAX_BYTES's default, 4 MiB: four list calls at once hold about
 * 4 x 2 x 4 MiB of documents (a row's two encodings are read) under the
 * service's 128 MiB heap, and a page of 100 definitions of the usual 2-3 KB
 * stays far below it (BENCHMARKS.md).
 */
export const defaultPageMaxBytes = 4 * 1024 * 1024;

/**
 * A search's statement: its page and its total. `countKey` is set when the total is counted (a COUNT over the
 * matches, not the counters): the same key is the same count, so the caller may keep what it answered at a
 * tenant revision and give it back (KnownTotal) to spare the next statement the count.
 */
export interface SearchStatement extends Statement {
  readonly countKey?: string;
}

/** A counted total a statement answered, and the version it was read at (its row's `total_version`). */
export interface KnownTotal {
  readonly version: number;
  readonly total: number;
}

/** What a caller knows of counted totals: by countKey, the last one answered and its revision. */
export type KnownTotals = (countKey: string) => KnownTotal | undefined;

/**
 * The total of a page's statement. A counted total known at a version (countVersionOf) is answered as it is
 * while the version is still the same, read in the statement's own snapshot: the version grows at every write
 * that can change the count, so an unchanged version is an unchanged count. Both databases evaluate only the
 * branch of a CASE they take, so the COUNT runs only when the version moved (measured: docs/decisions.md,
 * "Counted totals by revision").
 */
function totalOf(total: Sql, version: Sql | undefined, known: KnownTotal | undefined): Statement {
  if (version === undefined || known === undefined) return { sql: `(${total.sql})`, bindings: total.bindings };
  return {
    sql: `(CASE WHEN (${version.sql}) = ? THEN ? ELSE (${total.sql}) END)`,
    bindings: [...version.bindings, known.version, known.total, ...total.bindings],
  };
}

/**
 * What a counted total depends on, as a number that grows whenever the count can change, read in the
 * statement's snapshot (issue 24). A count over term rows only (words, tags, providers..., each of whole
 * values: `terms`) depends on those values' term rows, status and is_latest included (copied into each row),
 * and on nothing else: the sum of `v` over their counter rows (migration 0017: every change of a term row moves
 * its counter rows' `v`, and counter rows are never deleted), so a write elsewhere in the tenant keeps the
 * count. A count that reads more (`updatedSince`, the definitions' own column; a last word's range of values,
 * whose counter rows may be many more than its matches) takes the tenant's revision, which every write moves
 * (migration 0015). Either is 0 before anything was counted into it, and only grows.
 */
function countVersionOf(tenant: string, terms: readonly TermFilter[] | undefined): Sql {
  if (terms === undefined)
    return new Sql().add("COALESCE((SELECT revision FROM tenant_revisions WHERE tenant = ?), 0)", tenant);
  const version = new Sql();
  terms.forEach((term, i) => {
    version
      .add(
        `${i === 0 ? "" : "+ "}(SELECT COALESCE(SUM(v), 0) FROM definition_term_counts ` +
          "WHERE tenant = ? AND kind = ? AND value",
        tenant,
        TERM_KINDS[term.kind],
      )
      .in(term.values)
      .add(")");
  });
  return version;
}

/**
 * Kinds a definition has at most one value of: the counters of several values
 * of these add up to the number of definitions that carry any of them.
 */
const singleValued: ReadonlySet<TermFilter["kind"]> = new Set([
  "name",
  "provider",
  "platform",
  "version",
  "externalAgentID",
]);

/**
 * Whether the counters of definition_term_counts (0010) answer the total of
 * this one filter exactly: one value, or values of which no definition carries
 * two (two tags of one definition would count it twice).
 */
function countable(term: TermFilter): boolean {
  return term.range === undefined && singleMatch(term);
}

/** Whether a definition matches `term` by one term row at most (else the page needs DISTINCT). */
function singleMatch(term: TermFilter): boolean {
  return term.range === undefined && (term.values.length === 1 || singleValued.has(term.kind));
}

/**
 * The statement that answers a page of `query` in `tenant`, with its total.
 * Words of `q` not resolved yet are resolved here without a plan (resolveWords).
 */
export function buildSearch(
  dialect: Dialect,
  tenant: string,
  asked: ListQuery,
  maxBytes: number,
  knownTotals?: KnownTotals,
): SearchStatement {
  const query = resolveWords(asked);
  const [driverTerm, ...otherTerms] = query.terms;
  const shape: SearchShape = {
    dialect,
    tenant,
    query,
    driverTerm,
    otherTerms,
    o: driverTerm === undefined ? "x" : "o",
    // More than one value of the driving filter can match one definition twice.
    distinct: driverTerm !== undefined && !singleMatch(driverTerm) ? "DISTINCT " : "",
  };
  const { total, countKey } = totalOfMatches(shape);
  // Whole values of term rows only: the count moves with their counter rows' versions. A liveness filter's count
  // moves with liveness changes, which take tenant revisions.
  const termsOnly =
    driverTerm !== undefined &&
    query.updatedSince === undefined &&
    query.liveness === undefined &&
    query.drift === undefined &&
    query.terms.every((term) => term.range === undefined);
  const version = countKey === undefined ? undefined : countVersionOf(tenant, termsOnly ? query.terms : undefined);
  const totals = {
    total: totalOf(total, version, countKey === undefined ? undefined : knownTotals?.(countKey)),
    version,
  };
  const counting = countKey === undefined ? {} : { countKey };
  const rows = matches(shape, false);
  if (query.order.key === "relevance")
    return {
      ...relevancePage(dialect, tenant, query, { ...totals, rows, distinct: shape.distinct, maxBytes }),
      ...counting,
    };
  return { ...orderedPage(shape, rows, totals, maxBytes), ...counting };
}

/** A search's query (its words resolved) and what its statement's parts take from it (buildSearch). */
interface SearchShape {
  readonly dialect: Dialect;
  readonly tenant: string;
  readonly query: ListQuery;
  /** The first filter, whose term rows drive the statement (alias x); without one, agent_definitions does. */
  readonly driverTerm: TermFilter | undefined;
  /** The other filters, each an EXISTS on the definition's term rows. */
  readonly otherTerms: readonly TermFilter[];
  /** The alias of the definition's own row: x when it drives the statement, o when joined to the term rows. */
  readonly o: "x" | "o";
  /** `DISTINCT ` when the driving filter can match a definition twice, else empty. */
  readonly distinct: string;
}

/** The driving row's seq: a definition's, or its term row's (the same number). */
const seqOf = "x.seq";

/** `value IN (...)`, or the range of a last word typed partly. */
function matchValue(sql: Sql, alias: string, term: TermFilter): Sql {
  return term.range === undefined
    ? sql.add(`${alias}.value`).in(term.values)
    : sql.add(`${alias}.value >= ? AND ${alias}.value < ?`, term.range.from, term.range.below);
}

/** FROM and WHERE of the matches, without the page's position: for the page's rows, or `counting` them. */
function matches({ dialect, tenant, query, driverTerm, otherTerms, o }: SearchShape, counting: boolean): Sql {
  const { key } = query.order;
  const relevance = key === "relevance";
  const sql = new Sql().add(`FROM ${driverTerm !== undefined ? "definition_terms x" : "agent_definitions x"}`);
  // The page needs the definition's row for its order value; the count only for updatedSince.
  const joinsDefinition =
    driverTerm !== undefined && ((!counting && key !== "createdAt" && !relevance) || query.updatedSince !== undefined);
  if (joinsDefinition) sql.add(`JOIN agent_definitions o ON o.seq = ${seqOf}`);
  if (relevance && !counting) {
    const scored = relevanceScore(dialect, query.terms);
    sql.add(scored.join, ...scored.bindings);
  }
  sql.add("WHERE x.tenant = ?", tenant);
  if (driverTerm !== undefined) matchValue(sql.add("AND x.kind = ? AND", TERM_KINDS[driverTerm.kind]), "x", driverTerm);
  sql.add("AND x.status").in(query.statuses);
  if (query.latest) sql.add("AND x.is_latest = 1");
  if (query.updatedSince !== undefined) sql.add(`AND ${o}.updated_at >= ?`, toDatabaseTimestamp(query.updatedSince));
  // SQLite's cancellation point, once per candidate row: a search worker stops the statement there
  // (sqlite-client.ts).
  if (dialect !== "mysql") sql.add(`AND ${SEARCH_ALIVE}()`);
  livenessMatch(sql, query, seqOf);
  otherTerms.forEach((term, i) => {
    sql.add(
      `AND EXISTS (SELECT 1 FROM definition_terms e${i} WHERE e${i}.seq = ${seqOf} AND e${i}.kind = ? AND`,
      TERM_KINDS[term.kind],
    );
    matchValue(sql, `e${i}`, term).add(")");
  });
  return sql;
}

/**
 * The total's SELECT: from the counters when they answer it (no filter, or one countable filter, without
 * updatedSince), else a COUNT over the matches, which has a countKey (SearchStatement).
 */
function totalOfMatches(shape: SearchShape): { readonly total: Sql; readonly countKey?: string } {
  const { tenant, query, driverTerm, otherTerms } = shape;
  const total = new Sql();
  // The counters count terms and statuses; liveness is counted over the matches.
  const byLiveness = query.liveness !== undefined || query.drift !== undefined;
  if (driverTerm === undefined && query.updatedSince === undefined && !byLiveness) {
    total
      .add("SELECT COALESCE(SUM(n), 0) FROM definition_counts WHERE tenant = ? AND status", tenant)
      .in(query.statuses);
    if (query.latest) total.add("AND is_latest = 1");
    return { total };
  }
  if (
    driverTerm !== undefined &&
    otherTerms.length === 0 &&
    query.updatedSince === undefined &&
    !byLiveness &&
    countable(driverTerm)
  ) {
    total
      .add(
        "SELECT COALESCE(SUM(n), 0) FROM definition_term_counts WHERE tenant = ? AND kind = ? AND value",
        tenant,
        TERM_KINDS[driverTerm.kind],
      )
      .in(driverTerm.values);
    total.add("AND status").in(query.statuses);
    if (query.latest) total.add("AND is_latest = 1");
    return { total };
  }
  const counted = matches(shape, true);
  total.add(`SELECT COUNT(${shape.distinct === "" ? "*" : `DISTINCT ${seqOf}`})`).add(counted.sql, ...counted.bindings);
  return { total, countKey: JSON.stringify([total.sql, total.bindings]) };
}

/**
 * The statement of a page in creation, update or name order: the matches `rows` after the position, by the
 * order's column, ties by seq.
 */
function orderedPage(
  { dialect, tenant, query, o, distinct }: SearchShape,
  rows: Sql,
  totals: { total: Statement; version: Sql | undefined },
  maxBytes: number,
): Statement {
  const { key, descending } = query.order;
  const orderColumn = key === "updatedAt" ? `${o}.updated_at` : key === "name" ? `${o}.name` : seqOf;
  const after = query.after;
  const cmp = descending ? "<" : ">";
  if (after !== undefined) {
    if (key === "createdAt" || after.value === undefined) rows.add(`AND ${seqOf} ${cmp} ?`, after.seq);
    else
      rows.add(
        `AND ${orderColumn} ${cmp}= ? AND (${orderColumn} ${cmp} ? OR ${seqOf} ${cmp} ?)`,
        after.value,
        after.value,
        after.seq,
      );
  }
  const direction = descending ? "DESC" : "ASC";
  rows.add(
    `ORDER BY ${key === "createdAt" ? "" : `${orderColumn} ${direction}, `}${seqOf} ${direction} LIMIT ? OFFSET ?`,
    query.limit + 1,
    after === undefined ? query.offset : 0,
  );
  const ordered = key === "createdAt" ? "" : `, ${orderColumn} AS k`;
  const pageOrder = key === "createdAt" ? [`seq ${direction}`] : [`k ${direction}`, `seq ${direction}`];
  return pageStatement(
    dialect,
    tenant,
    totals,
    { sql: `SELECT ${distinct}${seqOf} AS seq${ordered} ${rows.sql}`, bindings: rows.bindings },
    { order: pageOrder, maxBytes },
  );
}

/**
 * The full-text score of orderBy=relevance for the matches of `q`, whose
 * words are `terms`' `word` filters (resolveWords: whole words, and the last
 * word's range as a beginning). A LEFT JOIN from the matches (alias x) to
 * the databases' full-text tables of migration 0009, which every write still
 * keeps, giving `ft.score` (higher is better): on MariaDB the InnoDB FULLTEXT
 * index's score of MATCH ... AGAINST in boolean mode (`+word +begin*`, a TF-IDF
 * rank), on SQLite FTS5's bm25 negated (`"word" AND "begin"*`). The set stays
 * `q`'s (the join never drops a row): a match the full-text query does not
 * find (its word is only a host resource's tool name, which the full-text
 * text leaves out, or accents the engine does not fold as `q` does) scores 0.
 */
export function relevanceScore(
  dialect: Dialect,
  terms: readonly TermFilter[],
): { readonly join: string; readonly bindings: ReadBinding[] } {
  const words = terms.filter((t) => t.kind === "word");
  // Words are runs of letters and digits (searchWordsOf): no operator or quote of either syntax is in them.
  if (dialect === "mysql") {
    const against = words
      .flatMap((t) => (t.range === undefined ? t.values.map((v) => `+${v}`) : [`+${t.range.from}*`]))
      .join(" ");
    return {
      join:
        "LEFT JOIN (SELECT f.seq, MATCH (f.body) AGAINST (? IN BOOLEAN MODE) AS score FROM definition_text f " +
        "WHERE MATCH (f.body) AGAINST (? IN BOOLEAN MODE)) ft ON ft.seq = x.seq",
      bindings: [against, against],
    };
  }
  const match = words
    .flatMap((t) => (t.range === undefined ? t.values.map((v) => `"${v}"`) : [`"${t.range.from}"*`]))
    .join(" AND ");
  // LIMIT -1 (no limit) keeps SQLite from flattening the subquery into the join, where it ran the
  // full-text query again for every match (185 ms for 1,000 matches at 100,000 definitions, BENCHMARKS.md):
  // so it is materialized once and joined through an automatic index on seq.
  return {
    join:
      "LEFT JOIN (SELECT rowid AS seq, -bm25(definition_fts) AS score FROM definition_fts " +
      "WHERE definition_fts MATCH ? LIMIT -1) ft ON ft.seq = x.seq",
    bindings: [match],
  };
}

/**
 * The statement of a page of orderBy=relevance: every match of `q` (the same
 * FROM and WHERE as its other orders, `rows`) with its score (relevanceScore),
 * best first, ties by seq; the page after the position's (score, seq). The
 * score is kept as a DECIMAL(30,9) on MariaDB, so the token carries it
 * exactly in text; SQLite's REAL goes through JavaScript's number unchanged.
 */
function relevancePage(
  dialect: Dialect,
  tenant: string,
  query: ListQuery,
  parts: { total: Statement; version: Sql | undefined; rows: Sql; distinct: string; maxBytes: number },
): Statement {
  const mysql = dialect === "mysql";
  const score = mysql ? "CAST(COALESCE(ft.score, 0) AS DECIMAL(30, 9))" : "COALESCE(ft.score, 0)";
  const scored = new Sql().add(
    `SELECT r.seq, r.k FROM (SELECT ${parts.distinct}x.seq AS seq, ${score} AS k ${parts.rows.sql}) r`,
    ...parts.rows.bindings,
  );
  const after = query.after;
  if (after !== undefined) {
    // A token's value is not signed (only its binding is checked): a forged one that is not a number reads as 0.
    const number = Number(after.value ?? 0);
    const value = mysql ? (after.value ?? "0") : Number.isFinite(number) ? number : 0;
    const bound = mysql ? "CAST(? AS DECIMAL(30, 9))" : "?";
    scored.add(`WHERE r.k < ${bound} OR (r.k = ${bound} AND r.seq > ?)`, value, value, after.seq);
  }
  scored.add("ORDER BY r.k DESC, r.seq ASC LIMIT ? OFFSET ?", query.limit + 1, after === undefined ? query.offset : 0);
  return pageStatement(
    dialect,
    tenant,
    { total: parts.total, version: parts.version },
    { sql: scored.sql, bindings: scored.bindings },
    { order: ["k DESC", "seq ASC"], maxBytes: parts.maxBytes, scored: true },
  );
}
