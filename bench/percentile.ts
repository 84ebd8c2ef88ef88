/** The `p`th percentile of `values` (sorts them in place): the value at floor(p% of the count); NaN when empty. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  values.sort((a, b) => a - b);
  return values[Math.min(values.length - 1, Math.floor((p / 100) * values.length))] as number;
}
