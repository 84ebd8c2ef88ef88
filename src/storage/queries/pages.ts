/**
 * A search's page (search.ts) and an agent's versions: the statement around the seqs a page selects (the
 * tenant's row, the total, the rows within the page's byte budget), and the page's order, which the statement
 * leaves to inSearchOrder.
 */
import { Buffer } from "node:buffer";
import type { ListQuery, Position } from "../../domain/list-query.js";
import type { DefinitionReadRow } from "../rows.js";
import type { Dialect } from "../run/connection.js";
import { readColumns } from "./reads.js";
import { Sql, type Statement } from "./sql-text.js";

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
export function pageStatement(
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
