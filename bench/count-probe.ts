/**
 * What a counted total costs when it is counted (issue 24). The search scenarios ask one search again and again
 * with nothing written in between, so after its first call the service answers a total whose COUNT it kept
 * (src/storage/counted-totals.ts) and the load measures a page. A COUNT of whole words is kept while none of its
 * words' term rows is written (their counter versions, migration 0017); a write to one of them makes the next call
 * count. This probe measures the three, paired, in one run: `rounds` times a write elsewhere in the tenant then the
 * search timed once (`elsewhere`: nothing it counts was written), a write to a definition that holds the words then
 * the search timed once (`counted`: its words' versions moved) and once more (`kept`), one request at a time. Each
 * write is a status change, ACTIVE and DEPRECATED in turn, both of which the default list counts, so no total moves
 * and both definitions end as they began.
 */
import { percentile } from "./percentile.js";

interface Percentiles {
  readonly p50: number;
  readonly p99: number;
}

export interface CountProbe {
  readonly rounds: number;
  /** p50 and p99 in ms of the search right after a write elsewhere in the tenant. */
  readonly elsewhere: Percentiles;
  /** The same right after a write to a definition that holds its words (counted), and of the search again (kept). */
  readonly counted: Percentiles;
  readonly kept: Percentiles;
}

export async function probeCountedTotal(
  target: { readonly baseUrl: string; readonly tenant: string; readonly authorization: string },
  query: string,
  /** Seeded definitions whose statuses the probe flips: one that the search matches, one that it does not. */
  ids: { readonly match: string; readonly elsewhere: string },
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
  const flip = async (id: string, i: number) => {
    const written = await fetch(`${path}/${id}/status`, {
      method: "PATCH",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({ status: i % 2 === 0 ? "DEPRECATED" : "ACTIVE" }),
    });
    if (written.status !== 200) throw new Error(`PATCH of ${id}'s status answered ${written.status}`);
    await written.arrayBuffer();
  };
  const elsewhere: number[] = [];
  const counted: number[] = [];
  const kept: number[] = [];
  // An even number of rounds: the definitions end ACTIVE, as they began.
  for (let i = 0; i < rounds + (rounds % 2); i++) {
    await flip(ids.elsewhere, i);
    const afterElsewhere = await timedSearch();
    await flip(ids.match, i);
    const first = await timedSearch();
    const again = await timedSearch();
    // Both statuses are counted: the total is the same, kept or counted.
    if (again.total !== first.total || afterElsewhere.total !== first.total)
      throw new Error(`?${query}: totals ${afterElsewhere.total}, ${first.total}, ${again.total}`);
    elsewhere.push(afterElsewhere.ms);
    counted.push(first.ms);
    kept.push(again.ms);
  }
  const summary = (values: number[]) => ({ p50: percentile(values, 50), p99: percentile(values, 99) });
  return { rounds, elsewhere: summary(elsewhere), counted: summary(counted), kept: summary(kept) };
}
