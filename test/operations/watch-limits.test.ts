import { describe, expect, it } from "vitest";
import type { Principal } from "../../src/auth/principal.js";
import { RegistryError } from "../../src/domain/errors.js";
import { callerOf, createWatchLimits } from "../../src/operations/watch-limits.js";

const principal = (subject: string, client?: string): Principal => ({
  subject,
  tenant: "t",
  domains: new Set(["Development"]),
  platformAdmin: false,
  ...(client === undefined ? {} : { client }),
});

/** The code a refused admission throws, or "admitted". */
function attempt(admit: () => () => void, kept: (() => void)[]): string {
  try {
    kept.push(admit());
    return "admitted";
  } catch (err) {
    return err instanceof RegistryError ? err.code : String(err);
  }
}

describe("watch limits", () => {
  it("counts a caller by its subject and client, not by the token", () => {
    expect(callerOf(principal("alice"))).toBe(callerOf(principal("alice")));
    expect(callerOf(principal("alice", "cli"))).not.toBe(callerOf(principal("alice", "ui")));
    expect(callerOf(principal("alice"))).not.toBe(callerOf(principal("bob")));
  });

  it("refuses past each limit in turn, and a release (once, however often called) frees its place", () => {
    const limits = createWatchLimits({ perToken: 2, perTenant: 4, http1PerTenant: 1, total: 5 });
    const kept: (() => void)[] = [];
    const watch = (tenant: string, subject: string, http1 = false) =>
      attempt(() => limits.admit({ tenant, principal: principal(subject), http1 }), kept);
    // The caller's 2, then the tenant's one HTTP/1.1 watch, then the tenant's 4, then the process's 5.
    expect([watch("t", "a"), watch("t", "a"), watch("t", "a")]).toEqual(["admitted", "admitted", "TOO_MANY_WATCHES"]);
    expect([watch("t", "b", true), watch("t", "c", true), watch("t", "c"), watch("t", "d")]).toEqual([
      "admitted",
      "TOO_MANY_WATCHES",
      "admitted",
      "TOO_MANY_WATCHES",
    ]);
    expect([watch("u", "a"), watch("u", "b")]).toEqual(["admitted", "WATCHES_FULL"]);
    expect(limits.open).toBe(5);
    const first = kept[0] as () => void;
    first();
    first();
    expect(limits.open).toBe(4);
    expect(watch("u", "b")).toBe("admitted");
    for (const release of kept) release();
    expect(limits.open).toBe(0);
    // Nothing of a tenant is left once its watches are gone: the counts start afresh.
    expect([watch("t", "a"), watch("t", "a")]).toEqual(["admitted", "admitted"]);
  });

  it("refuses a key early only with admit's own refusal, while the key's watches alone hold the caller's limit", () => {
    const limits = createWatchLimits({ perToken: 2, perTenant: 10, http1PerTenant: 10, total: 10 });
    const kept: (() => void)[] = [];
    const refused: unknown[] = [];
    const watch = (key: string | undefined, subject = "a", expiresAt?: number) =>
      attempt(() => {
        try {
          return limits.admit({ tenant: "t", principal: { ...principal(subject), expiresAt }, http1: true, key });
        } catch (err) {
          refused.push(err);
          throw err;
        }
      }, kept);
    // One watch of the key and one of another token of the caller: admit refuses the third, the key holds 1.
    expect([watch("k"), watch(undefined), watch("k")]).toEqual(["admitted", "admitted", "TOO_MANY_WATCHES"]);
    expect(limits.refuseEarly("k")).toBeUndefined();
    (kept.pop() as () => void)();
    // Two of the key: admit's refusal is kept and given again, counted.
    expect([watch("k"), watch("k")]).toEqual(["admitted", "TOO_MANY_WATCHES"]);
    expect(limits.refuseEarly("k")).toBe(refused.at(-1));
    expect(limits.refuseEarly("k")).toBe(refused.at(-1));
    expect(limits.refusedEarly).toBe(2);
    expect(limits.refuseEarly("other")).toBeUndefined();
    // A place of the key freed: no early refusal; all gone: nothing kept.
    (kept.pop() as () => void)();
    expect(limits.refuseEarly("k")).toBeUndefined();
    for (const release of kept.splice(0)) release();
    expect([watch("k"), watch("k")]).toEqual(["admitted", "admitted"]);
    expect(limits.refuseEarly("k")).toBeUndefined();
    for (const release of kept.splice(0)) release();
    // A key whose token has expired is not refused early (a request with it is UNAUTHENTICATED).
    const past = Date.now() - 1;
    expect([watch("x", "b", past), watch("x", "b", past), watch("x", "b", past)]).toEqual([
      "admitted",
      "admitted",
      "TOO_MANY_WATCHES",
    ]);
    expect(limits.refuseEarly("x")).toBeUndefined();
  });
});
