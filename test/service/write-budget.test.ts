import { describe, expect, it } from "vitest";
import { createWriteBudget } from "../../src/service/write-budget.js";

/** Whether `promise` has settled by the end of this turn's microtasks. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(() => (done = true));
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe("the write budget", () => {
  it("admits writes while they fit, and the next waiting one, in arrival order, as each ends", async () => {
    const budget = createWriteBudget(100);
    const first = await budget.take(60);
    const second = budget.take(60);
    const small = budget.take(10);
    expect(await settled(second)).toBe(false);
    // The small one would fit, but it came after the waiting one: it is not let past it.
    expect(await settled(small)).toBe(false);
    expect(budget).toMatchObject({ used: 60, waiting: 2 });
    first();
    first();
    expect(await settled(second)).toBe(true);
    expect(await settled(small)).toBe(true);
    expect(budget).toMatchObject({ used: 70, waiting: 0 });
    (await second)();
    (await small)();
    expect(budget.used).toBe(0);
  });

  it("runs a write heavier than the whole budget alone", async () => {
    const budget = createWriteBudget(100);
    const held = await budget.take(10);
    const heavy = budget.take(500);
    expect(await settled(heavy)).toBe(false);
    held();
    expect(await settled(heavy)).toBe(true);
    expect(budget.used).toBe(500);
  });
});
