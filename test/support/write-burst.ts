import { minimalDefinition } from "./definitions.js";

/** One POST of a burst and how it ended. */
export interface WriteOutcome {
  /** The definition's name: unique across the burst, so the database can be searched for it. */
  readonly name: string;
  /** The HTTP status, or "dropped" when the connection failed without an answer. */
  readonly status: number | "dropped";
  readonly body: any;
  readonly startedAt: number;
  readonly millis: number;
}

export interface WriteBurst {
  readonly outcomes: readonly WriteOutcome[];
  /**
   * Resolves once `predicate` holds for the outcomes so far (checked after each answer), or rejects after
   * `timeoutMs`.
   */
  until(predicate: (outcomes: readonly WriteOutcome[]) => boolean, timeoutMs: number): Promise<void>;
  /** Lets the writers finish their requests in flight and resolves with every outcome. */
  stop(): Promise<WriteOutcome[]>;
}

/**
 * `writers` loops, each POSTing new definitions (a new agent each) one after
 * another to `url` until stopped: a steady burst of writes to break the
 * database under.
 */
export function startWriteBurst({
  url,
  authorization,
  writers,
  prefix,
}: {
  url: string;
  authorization: string;
  writers: number;
  prefix: string;
}): WriteBurst {
  const outcomes: WriteOutcome[] = [];
  const waiters = new Set<() => void>();
  let stopped = false;
  const writer = async (w: number): Promise<void> => {
    for (let i = 0; !stopped; i++) {
      const name = `${prefix} ${w}-${i}`;
      const startedAt = Date.now();
      let status: number | "dropped";
      let body: any;
      try {
        const res = await fetch(url, {
          method: "POST",
          headers: { authorization, "content-type": "application/json" },
          body: JSON.stringify(
            minimalDefinition({
              name,
              skills: [
                { id: "a", name: "A", description: "a" },
                { id: "b", name: "B", description: "b" },
              ],
            }),
          ),
        });
        status = res.status;
        body = await res.json();
      } catch (error) {
        status = "dropped";
        body = String(error);
      }
      outcomes.push({ name, status, body, startedAt, millis: Date.now() - startedAt });
      for (const wake of waiters) wake();
      // A failing database answers at once: do not spin.
      if (status !== 201) await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  const running = Array.from({ length: writers }, (_, w) => writer(w));
  return {
    outcomes,
    until(predicate, timeoutMs) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`the burst did not reach the expected state in ${timeoutMs} ms`));
        }, timeoutMs);
        const check = (): void => {
          if (!predicate(outcomes)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
        check();
      });
    },
    async stop() {
      stopped = true;
      await Promise.all(running);
      return outcomes;
    },
  };
}
