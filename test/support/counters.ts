/**
 * The counters' check the suites share: how many rows a table has per value
 * of some columns, counted (COUNT(*)) or summed from counter rows (SUM(n)),
 * so a test can hold definition_counts and definition_term_counts to the
 * rows they count.
 */
import type { Knex } from "knex";

/**
 * Rows of `table` per value of `columns`: COUNT(*), or with `counters` the sum of their `n`, keyed by the
 * columns' values (is_latest as 0 or 1, whatever the driver answers) joined by NUL; groups of 0 are left
 * out, as a counter that fell back to 0 stays as a row.
 */
export async function groupCounts(
  db: Knex,
  table: string,
  columns: readonly string[],
  options: { readonly counters?: boolean; readonly where?: Readonly<Record<string, unknown>> } = {},
): Promise<Record<string, number>> {
  const query = db(table)
    .where(options.where ?? {})
    .select([...columns])
    .groupBy([...columns]);
  const rows = (await (options.counters === true ? query.sum({ n: "n" }) : query.count({ n: "*" }))) as Array<
    Record<string, unknown>
  >;
  const key = (row: Record<string, unknown>) =>
    columns.map((c) => (c === "is_latest" ? String(Number(row[c])) : String(row[c]))).join("\u0000");
  return Object.fromEntries(rows.filter((r) => Number(r.n) !== 0).map((r) => [key(r), Number(r.n)]));
}
