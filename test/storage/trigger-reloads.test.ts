/**
 * TriggerReloads (src/storage/run/broken-triggers.ts): the order a process's write attempts and reloads of
 * broken triggers keep, with a flush that only records when it ran. The same on MariaDB, where the flush is
 * real: test/storage/broken-triggers.test.ts.
 */
import { describe, expect, it } from "vitest";
import { TriggerReloads } from "../../src/storage/run/broken-triggers.js";

/** A promise and what settles it. */
function deferred(): { promise: Promise<void>; resolve: () => void; reject: (error: unknown) => void } {
  let resolve!: () => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<void>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
}

/** Lets every callback already queued run. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

describe("TriggerReloads", () => {
  it("flushes once the attempts under way have ended, and begins those asked for meanwhile after it", async () => {
    const reloads = new TriggerReloads();
    const events: string[] = [];
    const underWay = deferred();
    const running = reloads.attempt(async () => {
      events.push("attempt under way");
      await underWay.promise;
      events.push("attempt ended");
    });
    const failed = await reloads.attempt(async (generation) => generation);
    const reload = reloads.reload(failed, async () => {
      events.push("flush");
    });
    await settle();
    const later = reloads.attempt(async (generation) => {
      events.push(`later attempt after ${generation} reload`);
    });
    await settle();
    expect(events).toEqual(["attempt under way"]);

    underWay.resolve();
    expect(await reload).toBe(true);
    await Promise.all([running, later]);
    expect(events).toEqual(["attempt under way", "attempt ended", "flush", "later attempt after 1 reload"]);
  });

  it("flushes once for every attempt that asks while it waits, and not for one begun before it", async () => {
    const reloads = new TriggerReloads();
    let flushes = 0;
    const flush = async () => {
      flushes++;
    };
    const generation = await reloads.attempt(async (reloadsBefore) => reloadsBefore);
    expect(await Promise.all([1, 2, 3].map(() => reloads.reload(generation, flush)))).toEqual([true, true, true]);
    expect(flushes).toBe(1);
    // An attempt begun before that reload met the instance it dropped: no flush of its own.
    expect(await reloads.reload(generation, flush)).toBe(false);
    expect(flushes).toBe(1);
    // One begun after it flushes again.
    const after = await reloads.attempt(async (reloadsBefore) => reloadsBefore);
    expect(await reloads.reload(after, flush)).toBe(true);
    expect(flushes).toBe(2);
  });

  it("a failed flush rejects every reload that joined it, lets attempts begin, and the next one flushes", async () => {
    const reloads = new TriggerReloads();
    const refused = new Error("Access denied; you need the RELOAD privilege");
    const flushing = deferred();
    let flushes = 0;
    const generation = await reloads.attempt(async (reloadsBefore) => reloadsBefore);
    const joined = [1, 2].map(() =>
      reloads.reload(generation, () => {
        flushes++;
        return flushing.promise;
      }),
    );
    flushing.reject(refused);
    for (const reload of joined) await expect(reload).rejects.toBe(refused);
    expect(flushes).toBe(1);
    expect(await reloads.attempt(async (reloadsBefore) => reloadsBefore)).toBe(generation);
    expect(
      await reloads.reload(generation, async () => {
        flushes++;
      }),
    ).toBe(true);
    expect(flushes).toBe(2);
  });
});
