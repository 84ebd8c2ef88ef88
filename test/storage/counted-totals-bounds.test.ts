/**
 * What CountedTotals keeps (src/storage/counted-totals.ts): the last total per search, never an older
 * revision's over a newer one, nothing for a tenant without a revision row or for an overlong key, and at
 * most 256 searches, the least recently answered going first. Memory only: what the database does with a
 * kept total is test/storage/counted-totals.test.ts's.
 */
import { describe, expect, it } from "vitest";
import { CountedTotals } from "../../src/storage/counted-totals.js";

describe("CountedTotals", () => {
  it("keeps the newest revision's total of each search", () => {
    const totals = new CountedTotals();
    totals.keep("a", { revision: 5, total: 10 });
    expect(totals.get("a")).toEqual({ revision: 5, total: 10 });
    totals.keep("a", { revision: 7, total: 12 });
    // A slower search that read at an earlier revision answers after a faster one: the later stays.
    totals.keep("a", { revision: 6, total: 11 });
    expect(totals.get("a")).toEqual({ revision: 7, total: 12 });
    expect(totals.get("b")).toBeUndefined();
  });

  it("keeps nothing at revision 0 (no revision row to compare with) or for a key over 4 KiB", () => {
    const totals = new CountedTotals();
    totals.keep("a", { revision: 0, total: 3 });
    totals.keep("x".repeat(4_097), { revision: 2, total: 3 });
    totals.keep("y".repeat(4_096), { revision: 2, total: 4 });
    expect(totals.get("a")).toBeUndefined();
    expect(totals.get("x".repeat(4_097))).toBeUndefined();
    expect(totals.get("y".repeat(4_096))).toEqual({ revision: 2, total: 4 });
  });

  it("holds at most 256 searches, dropping the one answered longest ago", () => {
    const totals = new CountedTotals();
    for (let i = 0; i < 256; i++) totals.keep(`k${i}`, { revision: 1, total: i });
    // k0 answered again: now the newest; k1 is the oldest.
    totals.keep("k0", { revision: 2, total: 0 });
    totals.keep("k256", { revision: 1, total: 256 });
    expect(totals.get("k1")).toBeUndefined();
    expect(totals.get("k0")).toEqual({ revision: 2, total: 0 });
    expect(totals.get("k2")).toEqual({ revision: 1, total: 2 });
    expect(totals.get("k256")).toEqual({ revision: 1, total: 256 });
  });
});
