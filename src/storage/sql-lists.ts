/**
 * The repository's lists (sql-repository.ts): a tenant's searches and an agent's versions, their keyset
 * pages under a byte budget, and the counted totals kept by version (counted-totals.ts). SQL built per
 * request (queries/search.ts), run gated and time-limited (run/searches.ts).
 */

import type { Knex } from "knex";
import { tenantNotFound } from "../domain/errors.js";
import { CountedTotals } from "./counted-totals.js";
import {
  buildSearch,
  buildVersions,
  inSearchOrder,
  isBounded,
  needsWordPlan,
  orderValueOf,
  planWords,
  resolveWords,
  type SearchRow,
  wordPlanOf,
} from "./queries/search.js";
import type { ListQuery, ListResult, Page, StoredDefinition, Work } from "./repository.js";
import type { DefinitionReadRow } from "./rows.js";
import { fromDatabaseInteger, tenantRevisionOf, toStoredDefinition } from "./rows.js";
import type { Dialect } from "./run/connection.js";
import { type SearchLimits, type SearchRunner, searchDeadline, searchRunner } from "./run/searches.js";
import type { SearchTextKeeper } from "./search-text.js";

/** Runs a read, its failures translated (sql-repository.ts's guard). */
export type Guard = <T>(read: () => Promise<T>) => Promise<T>;

export class SqlLists {
  readonly #dialect: Dialect;
  /**
   * The list's searches and keyset pages (queries/search.ts, run/searches.ts): SQL built per request, run
   * through the driver.
   */
  readonly #search: SearchRunner;
  readonly #searchLimits: SearchLimits;
  /** RepositoryOptions.pageMaxBytes. */
  readonly #pageMaxBytes: number;
  /** The counted totals of this process's searches, by revision (counted-totals.ts). */
  readonly #countedTotals = new CountedTotals();
  /** MySQL: the full-text texts written after COMMIT, which relevance scores (search-text.ts). */
  readonly #texts: SearchTextKeeper | undefined;
  readonly #guard: Guard;

  constructor(
    db: Knex,
    dialect: Dialect,
    searchLimits: SearchLimits,
    { pageMaxBytes, texts, guard }: { pageMaxBytes: number; texts: SearchTextKeeper | undefined; guard: Guard },
  ) {
    this.#dialect = dialect;
    // Gated and time-limited, so searches cannot take the pool from reads and writes (run/searches.ts).
    this.#search = searchRunner(db, dialect, searchLimits);
    this.#searchLimits = searchLimits;
    this.#pageMaxBytes = pageMaxBytes;
    this.#texts = texts;
    this.#guard = guard;
  }

  async listVersions(tenant: string, agentNumber: number, page: Page, work: Work = {}): Promise<ListResult> {
    const { limit, offset } = normalise(page);
    // Agents are numbered from 1, so 0 stands for a number no agent can have; the tenant is still checked.
    const agent = Number.isSafeInteger(agentNumber) ? agentNumber : 0;
    const { sql, bindings } = buildVersions(
      this.#dialect,
      tenant,
      agent,
      { limit, offset, after: page.after },
      this.#pageMaxBytes,
    );
    // One agent's versions: an index range and a count of that agent's versions, never the tenant's.
    const rows = inSearchOrder(
      await this.#guard(() => this.#search(sql, bindings, { bounded: true, tenant, signal: work.signal })),
      "createdAt",
      true,
    );
    return pageWithNext(tenant, rows, { limit, maxBytes: this.#pageMaxBytes }, () => undefined);
  }

  async search(tenant: string, asked: ListQuery, work: Work = {}): Promise<ListResult> {
    const { limit, offset } = normalise(asked);
    // One budget for the search, whatever statements it takes: each gets what is left.
    const deadline = searchDeadline(this.#searchLimits);
    // Several words, or a last word typed partly: their counters first (bounded), to drive by the rarest
    // word and to resolve the last one (queries/search.ts resolveWords).
    let query = asked;
    if (needsWordPlan(asked)) {
      const plan = planWords(tenant, asked);
      const planned = await this.#guard(() =>
        this.#search(plan.sql, plan.bindings, { bounded: true, tenant, signal: work.signal, deadline }),
      );
      query = resolveWords(asked, wordPlanOf(planned as unknown as Array<Record<string, unknown>>));
    }
    // MySQL's relevance scores the full-text texts, written after COMMIT: this process's writes' are in first.
    if (query.order.key === "relevance") await this.#texts?.flushed();
    const { sql, bindings, countKey } = buildSearch(
      this.#dialect,
      tenant,
      { ...query, limit, offset },
      this.#pageMaxBytes,
      this.#countedTotals.get,
    );
    const call = { bounded: isBounded(query), tenant, signal: work.signal, deadline };
    const rows = await this.#guard(() => this.#search(sql, bindings, call));
    const ordered = inSearchOrder(rows, query.order.key, query.order.descending);
    const page = pageWithNext(tenant, ordered, { limit, maxBytes: this.#pageMaxBytes }, (row) =>
      orderValueOf(query.order.key, row),
    );
    const version = rows[0]?.total_version;
    if (countKey !== undefined && version != null)
      this.#countedTotals.keep(countKey, { version: fromDatabaseInteger(version), total: page.total });
    return page;
  }

  /** The searches waiting at the gate (poolStats). */
  waiting(): number {
    return this.#search.waiting();
  }

  /** Ends the search workers (SQLite): their read-only connections end before the last one closes the file. */
  close(): Promise<void> {
    return this.#search.close();
  }
}

/**
 * The page a search read (in order: up to `limit` rows and one more, fewer when
 * the byte budget cut them, queries/search.ts's pageStatement), with its total, and
 * the position of its last row when a row after it shows there is a next page.
 * The page ends at `limit` rows, or before the row that would take its stored
 * JSON past `maxBytes`; its first row is answered whatever its size.
 */
function pageWithNext(
  tenant: string,
  rows: readonly SearchRow[],
  size: { limit: number; maxBytes: number },
  orderValue: (row: SearchRow) => string | undefined,
): ListResult {
  let answered = 0;
  let bytes = 0;
  for (const row of rows) {
    if (answered === size.limit || row.id === null) break;
    bytes += row.document_json?.byteLength ?? 0;
    if (answered > 0 && bytes > size.maxBytes) break;
    answered++;
  }
  const more = rows.length > answered && rows[answered]?.id != null;
  const all = pageOf(tenant, rows);
  const page = more ? { ...all, items: all.items.slice(0, answered) } : all;
  const last = rows[answered - 1];
  if (!more || last === undefined || last.seq == null) return page;
  const value = orderValue(last);
  return {
    ...page,
    next: value === undefined ? { seq: fromDatabaseInteger(last.seq) } : { seq: fromDatabaseInteger(last.seq), value },
  };
}

/** The page a search read, with its total; `TENANT_NOT_FOUND` when it found no tenant row. */
function pageOf(tenant: string, rows: readonly DefinitionReadRow[]): ListResult {
  const [first] = rows;
  if (first === undefined) throw tenantNotFound(tenant);
  const items: StoredDefinition[] = [];
  for (const row of rows) {
    const stored = toStoredDefinition(tenant, row);
    if (stored !== undefined) items.push(stored);
  }
  // mysql2 answers COUNT(*) as a number or, for BIGINT with supportBigNumbers, possibly a string.
  return { total: fromDatabaseInteger(first.total ?? 0), items, revision: tenantRevisionOf(first) };
}

function normalise(page: Page): { limit: number; offset: number } {
  return { limit: countOf(page.limit), offset: countOf(page.offset) };
}

/** A whole number from 0 to 2^53 - 1: what both databases take for LIMIT and OFFSET, bound as it is into SQL. */
function countOf(value: number): number {
  return Number.isNaN(value) ? 0 : Math.min(Math.max(0, Math.trunc(value)), Number.MAX_SAFE_INTEGER);
}
