/**
 * The words of `q` (issue 24: words are terms of kind `word`): the counters read before a page when there are
 * several words or a last word typed partly (planWords), and the words turned into term filters that search.ts
 * pages like `tag` (resolveWords).
 */
import { Buffer } from "node:buffer";
import type { ListQuery, TermFilter } from "../../domain/list-query.js";
import { TERM_KINDS } from "./search-index.js";
import { Sql, type Statement } from "./sql-text.js";

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
