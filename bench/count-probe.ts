/**
 * What a counted total costs when it is counted (issue 24). The search scenarios ask one search again and again
 * with nothing written in between, so after its first call the service answers a total whose COUNT it kept at the
 * tenant's revision (src/storage/counted-totals.ts) and the load measures a page. A tenant written between two
 * calls pays the COUNT. This probe measures both, paired, in one run: `rounds` times a write in the tenant (a
 * status change of one seeded definition, ACTIVE and DEPRECATED in turn, both of which the default list counts, so
 * no total moves and the definition ends as it began) then the search timed once (counted: the revision moved)
 * and once more (kept), one request at a time.
 */
import { percentile } from "./percentile.js";

export interface CountProbe {
  readonly rounds: number;
  /** p50 and p99 in ms of the search right after a write (counted), and of the same search again (kept). */
  readonly counted: { readonly p50: number; readonly p99: number };
  readonly kept: { readonly p50: number; readonly p99: number };
}

export async function probeCountedTotal(
  target: { readonly baseUrl: string; readonly tenant: string; readonly authorization: string },
  query: string,
  /** A seeded definition whose status the probe flips. */
  id: string,
  rounds = 24,
): Promise<CountProbe> {
  const path = `${target.baseUrl}/api/asor/v1/${target.tenant}/agentDefinition`;
  const headers = { authorization: target.authorization };
  const timedSearch = async (): Promise<{ ms: number; total: number }> => {
    const t0 = performance.now();
    const response = await fetch(`${path}?${query}`, { headers });
    const body = (await response.json()) as { total: number };
    const ms = performance.now() - t0;
    if (response.status !== 200) throw new Error(`GET ?${query} answered ${response.status}`);
    return { ms, total: body.total };
  };
  const counted: number[] = [];
  const kept: number[] = [];
  // An even number of rounds: the definition ends ACTIVE, as it began.
  for (let i = 0; i < rounds + (rounds % 2); i++) {
    const written = await fetch(`${path}/${id}/status`, {
      method: "PATCH",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({ status: i % 2 === 0 ? "DEPRECATED" : "ACTIVE" }),
    });
    if (written.status !== 200) throw new Error(`PATCH of ${id}'s status answered ${written.status}`);
    await written.arrayBuffer();
    const first = await timedSearch();
    const again = await timedSearch();
    // The write matched nothing searched: the count is the same, counted or kept.
    if (again.total !== first.total) throw new Error(`?${query}: total ${first.total}, then ${again.total}`);
    counted.push(first.ms);
    kept.push(again.ms);
  }
  const summary = (values: number[]) => ({ p50: percentile(values, 50), p99: percentile(values, 99) });
  return { rounds, counted: summary(counted), kept: summary(kept) };
}
