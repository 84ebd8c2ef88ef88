/**
 * What CountedTotals keeps (src/storage/counted-totals.ts): the last total per search, never an older
 * version's over a newer one, nothing for an overlong key, and at
 * most 256 searches, the least recently answered going first. Memory only: what the database does with a
 * kept total is test/storage/counted-totals.test.ts's.
 */
import { describe, expect, it } from "vitest";
import { CountedTotals } from "../../src/storage/counted-totals.js";

describe("CountedTotals", () => {
  it("keeps the newest version's total of each search", () => {
    const totals = new CountedTotals();
    totals.keep("a", { version: 5, total: 10 });
    expect(totals.get("a")).toEqual({ version: 5, total: 10 });
    totals.keep("a", { version: 7, total: 12 });
    // A slower search that read at an earlier version answers after a faster one: the later stays.
    totals.keep("a", { version: 6, total: 11 });
    expect(totals.get("a")).toEqual({ version: 7, total: 12 });
    expect(totals.get("b")).toBeUndefined();
  });

  it("keeps a total at version 0 (the statement reads nothing counted yet as 0), nothing for a key over 4 KiB", () => {
    const totals = new CountedTotals();
    totals.keep("a", { version: 0, total: 3 });
    totals.keep("x".repeat(4_097), { version: 2, total: 3 });
    totals.keep("y".repeat(4_096), { version: 2, total: 4 });
    expect(totals.get("a")).toEqual({ version: 0, total: 3 });
    expect(totals.get("x".repeat(4_097))).toBeUndefined();
    expect(totals.get("y".repeat(4_096))).toEqual({ version: 2, total: 4 });
  });

  it("holds at most 256 searches, dropping the one answered longest ago", () => {
    const totals = new CountedTotals();
    for (let i = 0; i < 256; i++) totals.keep(`k${i}`, { version: 1, total: i });
    // k0 answered again: now the newest; k1 is the oldest.
    totals.keep("k0", { version: 2, total: 0 });
    totals.keep("k256", { version: 1, total: 256 });
    expect(totals.get("k1")).toBeUndefined();
    expect(totals.get("k0")).toEqual({ version: 2, total: 0 });
    expect(totals.get("k2")).toEqual({ version: 1, total: 2 });
    expect(totals.get("k256")).toEqual({ version: 1, total: 256 });
  });
});
