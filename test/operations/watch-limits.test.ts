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
});
