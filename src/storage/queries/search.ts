/**
 * The list's searches (filters, keywords, orders, keyset pages) and the
 * versions list's keyset pages, as SQL per dialect over the side tables of
 * migration 0009.
 *
 * One statement per page: the tenant's row (so an unknown tenant is told
 * apart from an empty page), the page's seqs from one index (a LIMIT inside a
 * derived table), then only those rows read and joined, and the total as an
 * uncorrelated scalar subquery, which both databases run once per statement.
 * OFFSET over the joined rows made MariaDB read and sort whole documents (16 s
 * for the last page of 100,000 definitions, BENCHMARKS.md), and an ORDER BY
 * outside the derived table cost it a temporary table with the documents in
 * it; so the statement leaves the page's order to inSearchOrder. Where the
 * seqs come from depends on what is asked (buildSearch):
 *
 * - an exact filter or a word of `q` (issue 24: words are terms of kind
 *   `word`, resolveWords): `definition_terms` through (tenant, kind, value,
 *   seq, status, is_latest), so the page and the count of one value are one
 *   index range each, in seq order; the last word of `q` when it begins
 *   several words, a range of values;
 * - else `agent_definitions` through the list index of the order (0009).
 *
 * orderBy=relevance takes the same matches, scores each by the full-text
 * tables of 0009 and sorts them all (relevanceScore, relevancePage).
 *
 * Every further filter is an EXISTS on definition_terms' primary key (seq,
 * kind, value). The unfiltered total comes from definition_counts, the total
 * of one exact filter from definition_term_counts (0010). A page
 * reads one row more than it answers, to know whether there is a next one.
 *
 * The statements' shapes vary with the number of values of each filter, so
 * they are not prepared once like the hot reads: MySQL sends them as text
 * (mysql2's query), SQLite prepares each one per call (tens of microseconds)
 * instead of keeping a statement per shape a caller could invent.
 */
import { Buffer } from "node:buffer";
import type { ListQuery, Position, TermFilter } from "../../domain/list-query.js";
import type { DefinitionReadRow } from "../rows.js";
import { toDatabaseTimestamp } from "../rows.js";
import type { Dialect } from "../run/connection.js";
import type { ReadBinding } from "./reads.js";
import { readColumns } from "./reads.js";
import { TERM_KINDS } from "./search-index.js";
import { SEARCH_ALIVE } from "./sql-functions.js";

/** A row of a search: a DefinitionReadRow with what the next page's position is made of. */
export interface SearchRow extends DefinitionReadRow {
  readonly seq?: number | string | null;
  readonly order_name?: string | null;
  /** The full-text score of orderBy=relevance (relevanceScore). */
  readonly order_score?: number | string | null;
  /** What a counted total was read at (countVersionOf), when the statement counts one. */
  readonly total_version?: number | string | null;
}

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

/** One statement and its bindings. */
export interface Statement {
  readonly sql: string;
  readonly bindings: readonly ReadBinding[];
}

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

/** SQL fragments and their bindings, in order. */
class Sql {
  readonly parts: string[] = [];
  readonly bindings: ReadBinding[] = [];
  add(sql: string, ...bindings: ReadBinding[]): this {
    this.parts.push(sql);
    this.bindings.push(...bindings);
    return this;
  }
  in(values: readonly ReadBinding[]): this {
    return this.add(`IN (${values.map(() => "?").join(", ")})`, ...values);
  }
  get sql(): string {
    return this.parts.join(" ");
  }
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
 * The counters `resolveWords` chooses by, read before the page when `q` has
 * more than one word or a last word typed partly: one bounded statement
 * (planWords), each word's count of matches and up to two words of the
 * tenant's vocabulary that begin with the last one.
 */
export interface WordPlan {
  /** Matches per whole word (the asked statuses and latest); a word absent has none. */
  readonly counts: ReadonlyMap<string, number>;
  /** The first two words (binary order) of the tenant's that begin with `query.prefix`, with their counts. */
  readonly vocabulary: ReadonlyArray<{ readonly word: string; readonly count: number }>;
}

/** Whether `query` is worth a plan (planWords) before its page. */
export function needsWordPlan(query: ListQuery): boolean {
  return query.prefix !== undefined || query.words.length > 1;
}

/**
 * The statement of a WordPlan: the whole words' counts from
 * definition_term_counts (at most 96 rows a word), and the vocabulary from
 * the same table's primary key range (tenant, kind, value, ...) from the
 * prefix to the first value past it, grouped by value, LIMIT 2: it reads the
 * counter rows of at most two live words (and of the words whose counters
 * fell to 0 on the way).
 */
export function planWords(tenant: string, query: ListQuery): Statement {
  const kind = TERM_KINDS.word;
  const where = (sql: Sql): Sql => {
    sql.add("AND status").in(query.statuses);
    if (query.latest) sql.add("AND is_latest = 1");
    return sql;
  };
  const parts: Sql[] = [];
  if (query.words.length > 0)
    parts.push(
      where(
        new Sql()
          .add(
            "SELECT value, SUM(n) AS n, 0 AS begins FROM definition_term_counts WHERE tenant = ? AND kind = ?",
            tenant,
            kind,
          )
          .add("AND value")
          .in(query.words),
      ).add("GROUP BY value"),
    );
  if (query.prefix !== undefined)
    parts.push(
      where(
        new Sql().add(
          "SELECT value, SUM(n) AS n, 1 AS begins FROM definition_term_counts WHERE tenant = ? AND kind = ? AND " +
            "value >= ? AND value < ?",
          tenant,
          kind,
          query.prefix,
          pastPrefix(query.prefix),
        ),
      ).add("GROUP BY value HAVING SUM(n) > 0 ORDER BY value LIMIT 2"),
    );
  const sql = new Sql();
  parts.forEach((part, i) => {
    sql.add(`${i === 0 ? "" : "UNION ALL "}SELECT * FROM (${part.sql}) w${i}`, ...part.bindings);
  });
  return { sql: sql.sql, bindings: sql.bindings };
}

/** The WordPlan in the rows of planWords' statement. */
export function wordPlanOf(rows: ReadonlyArray<Record<string, unknown>>): WordPlan {
  const counts = new Map<string, number>();
  const vocabulary: Array<{ word: string; count: number }> = [];
  for (const row of rows) {
    const word = String(row.value);
    const count = Number(row.n ?? 0);
    if (Number(row.begins) === 1) vocabulary.push({ word, count });
    else counts.set(word, count);
  }
  vocabulary.sort((a, b) => Buffer.compare(Buffer.from(a.word), Buffer.from(b.word)));
  return { counts, vocabulary };
}

/**
 * The first string past every string that begins with `prefix`, in binary
 * (code point) order: its last code point plus one. The upper bound of the
 * prefix's value range, computed here so both databases compare the same
 * bounds the same way (no LIKE and its collation).
 */
export function pastPrefix(prefix: string): string {
  const points = [...prefix].map((c) => c.codePointAt(0) ?? 0);
  while (points.length > 0) {
    let last = (points.pop() ?? 0) + 1;
    if (last >= 0xd800 && last <= 0xdfff) last = 0xe000;
    if (last <= 0x10ffff) return String.fromCodePoint(...points, last);
  }
  // Only a prefix of U+10FFFF alone: nothing is past every string; a bound no word reaches.
  return String.fromCodePoint(0x10ffff).repeat(prefix.length + 1);
}

/**
 * `query` with its words turned into `word` term filters, ahead of its other
 * filters, so buildSearch pages them like `tag`: each whole word one value,
 * the rarest first when `plan` tells (the first filter drives the page, the
 * others are EXISTS probes), and the last word by what the plan found of it:
 * no word of the tenant begins with it, or exactly one does → that one word
 * (its counters give the total); two or more, or no plan → the range of
 * every value that begins with it.
 */
export function resolveWords(query: ListQuery, plan?: WordPlan): ListQuery {
  if (query.words.length === 0 && query.prefix === undefined) return query;
  const whole = [...query.words];
  let range: TermFilter | undefined;
  if (query.prefix !== undefined) {
    const vocabulary = plan?.vocabulary;
    if (vocabulary !== undefined && vocabulary.length <= 1) {
      const word = vocabulary[0]?.word ?? query.prefix;
      if (!whole.includes(word)) whole.push(word);
    } else range = { kind: "word", values: [], range: { from: query.prefix, below: pastPrefix(query.prefix) } };
  }
  const countOf = (word: string): number =>
    plan?.counts.get(word) ?? plan?.vocabulary.find((v) => v.word === word)?.count ?? 0;
  if (plan !== undefined) whole.sort((a, b) => countOf(a) - countOf(b));
  const words: TermFilter[] = whole.map((word) => ({ kind: "word", values: [word] }));
  const { prefix: _, ...rest } = query;
  return { ...rest, words: [], terms: [...words, ...(range === undefined ? [] : [range]), ...query.terms] };
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
  const mysql = dialect === "mysql";
  const { key, descending } = query.order;
  const [driverTerm, ...otherTerms] = query.terms;
  const source = driverTerm !== undefined ? "terms" : "definitions";
  const seqOf = "x.seq";
  const from = source === "terms" ? "definition_terms x" : "agent_definitions x";
  // The page needs the definition's row for its order value; the count only for updatedSince.
  const relevance = key === "relevance";
  const joinsDefinition = (counting: boolean) =>
    source !== "definitions" && ((!counting && key !== "createdAt" && !relevance) || query.updatedSince !== undefined);
  const o = source === "definitions" ? "x" : "o";
  const orderColumn = key === "updatedAt" ? `${o}.updated_at` : key === "name" ? `${o}.name` : seqOf;
  // More than one value of the driving filter can match one definition twice.
  const distinct = driverTerm !== undefined && !singleMatch(driverTerm) ? "DISTINCT " : "";

  /** `value IN (...)`, or the range of a last word typed partly. */
  const matchValue = (sql: Sql, alias: string, term: TermFilter): Sql =>
    term.range === undefined
      ? sql.add(`${alias}.value`).in(term.values)
      : sql.add(`${alias}.value >= ? AND ${alias}.value < ?`, term.range.from, term.range.below);

  /** FROM and WHERE of the matches, without the page's position. */
  const matches = (counting: boolean): Sql => {
    const sql = new Sql().add(`FROM ${from}`);
    if (joinsDefinition(counting)) sql.add(`JOIN agent_definitions o ON o.seq = ${seqOf}`);
    if (relevance && !counting) {
      const scored = relevanceScore(dialect, query.terms);
      sql.add(scored.join, ...scored.bindings);
    }
    sql.add("WHERE x.tenant = ?", tenant);
    if (driverTerm !== undefined)
      matchValue(sql.add("AND x.kind = ? AND", TERM_KINDS[driverTerm.kind]), "x", driverTerm);
    sql.add("AND x.status").in(query.statuses);
    if (query.latest) sql.add("AND x.is_latest = 1");
    if (query.updatedSince !== undefined) sql.add(`AND ${o}.updated_at >= ?`, toDatabaseTimestamp(query.updatedSince));
    // SQLite's cancellation point, once per candidate row: a search worker stops the statement there
    // (sqlite-client.ts).
    if (!mysql) sql.add(`AND ${SEARCH_ALIVE}()`);
    otherTerms.forEach((term, i) => {
      sql.add(
        `AND EXISTS (SELECT 1 FROM definition_terms e${i} WHERE e${i}.seq = ${seqOf} AND e${i}.kind = ? AND`,
        TERM_KINDS[term.kind],
      );
      matchValue(sql, `e${i}`, term).add(")");
    });
    return sql;
  };

  const total = new Sql();
  let countKey: string | undefined;
  if (source === "definitions" && query.updatedSince === undefined) {
    total
      .add("SELECT COALESCE(SUM(n), 0) FROM definition_counts WHERE tenant = ? AND status", tenant)
      .in(query.statuses);
    if (query.latest) total.add("AND is_latest = 1");
  } else if (
    driverTerm !== undefined &&
    otherTerms.length === 0 &&
    query.updatedSince === undefined &&
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
  } else {
    const counted = matches(true);
    total.add(`SELECT COUNT(${distinct === "" ? "*" : `DISTINCT ${seqOf}`})`).add(counted.sql, ...counted.bindings);
    countKey = JSON.stringify([total.sql, total.bindings]);
  }
  // Whole values of term rows only: the count moves with their counter rows' versions.
  const termsOnly =
    source === "terms" && query.updatedSince === undefined && query.terms.every((term) => term.range === undefined);
  const version = countKey === undefined ? undefined : countVersionOf(tenant, termsOnly ? query.terms : undefined);
  const totalStatement = totalOf(total, version, countKey === undefined ? undefined : knownTotals?.(countKey));
  const counting = countKey === undefined ? {} : { countKey };

  if (relevance)
    return {
      ...relevancePage(dialect, tenant, query, {
        total: totalStatement,
        version,
        rows: matches(false),
        distinct,
        maxBytes,
      }),
      ...counting,
    };

  const rows = matches(false);
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
  return {
    ...pageStatement(
      dialect,
      tenant,
      { total: totalStatement, version },
      { sql: `SELECT ${distinct}${seqOf} AS seq${ordered} ${rows.sql}`, bindings: rows.bindings },
      { order: pageOrder, maxBytes },
    ),
    ...counting,
  };
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

/**
 * A page of one agent's versions, newest first, after the position `after` (exclusive) when given; all
 * versions are counted.
 */
export function buildVersions(
  dialect: Dialect,
  tenant: string,
  agentNumber: number,
  page: { limit: number; offset: number; after?: Position | undefined },
  maxBytes: number,
): Statement {
  const { limit, offset, after } = page;
  const seqs = new Sql().add(
    "SELECT seq FROM agent_definitions WHERE tenant = ? AND agent_number = ?",
    tenant,
    agentNumber,
  );
  if (after !== undefined) seqs.add("AND seq < ?", after.seq);
  seqs.add("ORDER BY seq DESC LIMIT ? OFFSET ?", limit + 1, after === undefined ? offset : 0);
  const total = {
    sql: "(SELECT COUNT(*) FROM agent_definitions WHERE tenant = ? AND agent_number = ?)",
    bindings: [tenant, agentNumber],
  };
  return pageStatement(dialect, tenant, { total }, seqs, { order: ["seq DESC"], maxBytes });
}

/** The byte budget of a page: its rows in the page's order, and how many of their JSON bytes it may hold. */
interface PageBudget {
  /**
   * The page's order over the columns of its seqs (`seq`, and `k` when ordered by a value), each with its
   * direction.
   */
  readonly order: readonly string[];
  /** PAGE_MAX_BYTES: the stored JSON bytes a page may hold (pageWithNext cuts it there). */
  readonly maxBytes: number;
  /** Whether the seqs carry a score `k` (relevance), answered as `order_score`. */
  readonly scored?: boolean;
}

/**
 * The size of a row `alias` of agent_definitions in JSON bytes, read without
 * its document: MySQL's stored column (migration 0011), SQLite's
 * octet_length, which reads the record's header only.
 */
export function documentBytes(dialect: Dialect, alias: string): string {
  return dialect === "mysql" ? `${alias}.document_bytes` : `octet_length(${alias}.document)`;
}

/**
 * The statement around a page (the top of this file says why this shape): the
 * tenant's row, `total` (with the version a counted one was read at, as
 * `total_version`), and the definitions (with their agents) whose seqs
 * `seqs` selects (a derived table `p` with a `seq` column, and `k` when ordered by a value).
 *
 * Of those seqs only the ones a page of `budget.maxBytes` can answer are
 * read, so one list call holds about a budget of documents whatever their
 * sizes (issue 25): each seq's JSON bytes are summed in the page's order
 * (a window over the page's few rows, joined by primary key for their size
 * column), and a row is read when the rows before it hold at most the budget.
 * That is every row the page answers, then the one that tells there is more;
 * the first two rows are read whatever their sizes, so a page always answers
 * at least one definition. pageWithNext makes the cut on the bytes it holds.
 */
function pageStatement(
  dialect: Dialect,
  tenant: string,
  { total, version }: { total: Statement; version?: Sql | undefined },
  seqs: Statement,
  budget: PageBudget,
): Statement {
  const order = budget.order.map((column) => `s.${column}`).join(", ");
  const bytes = documentBytes(dialect, "z");
  const sized = new Sql()
    .add(
      `SELECT w.* FROM (SELECT s.*, SUM(${bytes}) OVER (ORDER BY ${order} ROWS UNBOUNDED PRECEDING) - ${bytes} AS ` +
        `bytes_before,`,
    )
    .add(
      `ROW_NUMBER() OVER (ORDER BY ${order}) AS n FROM (${seqs.sql}) s JOIN agent_definitions z ON z.seq = s.seq) w`,
      ...seqs.bindings,
    )
    .add("WHERE w.bytes_before <= ? OR w.n <= 2", budget.maxBytes);
  const score = budget.scored === true ? "p.k AS order_score, " : "";
  const sql = new Sql()
    .add(`SELECT ${total.sql} AS total,`, ...total.bindings)
    .add(version === undefined ? "" : `(${version.sql}) AS total_version,`, ...(version?.bindings ?? []))
    .add(`r.revision AS tenant_revision, d.seq, d.name AS order_name, ${score}${readColumns(dialect)}`)
    .add("FROM tenants t")
    // The tenant's revision in the same snapshot as the page (reads.ts's tenantRevisionColumn says why).
    .add("LEFT JOIN tenant_revisions r ON r.tenant = t.name")
    .add(`LEFT JOIN (${sized.sql}) p ON 1 = 1`, ...sized.bindings)
    .add("LEFT JOIN agent_definitions d ON d.seq = p.seq")
    .add("LEFT JOIN agents a ON a.tenant = d.tenant AND a.number = d.agent_number")
    .add("WHERE t.name = ?", tenant);
  return { sql: sql.sql, bindings: sql.bindings };
}

/** The value `order` sorts a row by: its updated_at as stored, its name, or nothing (seq). */
export function orderValueOf(key: ListQuery["order"]["key"], row: SearchRow): string | undefined {
  if (key === "updatedAt") return row.updated_at === null ? undefined : String(row.updated_at);
  if (key === "name") return row.order_name ?? undefined;
  // MariaDB's DECIMAL comes as its exact text, SQLite's REAL as a number whose String() reads back the same.
  if (key === "relevance") return row.order_score == null ? undefined : String(row.order_score);
  return undefined;
}

/**
 * Puts a page's rows in the list's order (the statement leaves it to us, as
 * the hot reads do): by the order value, then seq. Names compare as the
 * databases compare them, byte for byte in UTF-8.
 */
export function inSearchOrder(rows: SearchRow[], key: ListQuery["order"]["key"], descending: boolean): SearchRow[] {
  const sign = descending ? -1 : 1;
  const encoder = new TextEncoder();
  const bytes = (value: string | undefined): Uint8Array => encoder.encode(value ?? "");
  return rows.sort((a, b) => {
    if (key === "relevance") {
      // Best first, then creation (the statement's ORDER BY r.k DESC, r.seq ASC).
      const byScore = Number(b.order_score ?? 0) - Number(a.order_score ?? 0);
      return byScore !== 0 ? byScore : Number(a.seq ?? 0) - Number(b.seq ?? 0);
    }
    if (key !== "createdAt") {
      const byValue = Buffer.compare(bytes(orderValueOf(key, a)), bytes(orderValueOf(key, b)));
      if (byValue !== 0) return sign * byValue;
    }
    return sign * (Number(a.seq ?? 0) - Number(b.seq ?? 0));
  });
}
