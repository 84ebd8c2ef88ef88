/**
 * The search gate (run/searches.ts searchRunner): at most `limit` costly
 * search statements at once on the database, and at most `perTenant` of them
 * for any one tenant, so one tenant keeping the gate busy cannot make the
 * others wait behind it (issue 25: one tenant holding every slot made another
 * tenant's small search wait p50 9.5 s).
 *
 * Waiters queue per tenant, first come first served within a tenant. A freed
 * slot goes round-robin between the tenants that wait and are below their own
 * limit: the tenant served goes to the back of the rotation, so a tenant with a
 * hundred waiting searches takes one turn like a tenant with one. No polling:
 * a slot is handed straight to its waiter, so a newcomer never overtakes an
 * eligible waiter. A waiter whose signal aborts (its client left, its time
 * budget ran out) leaves the line at once.
 */

/** One waiting search: wakes it with the slot. */
type Wake = () => void;

export class Gate {
  #free: number;
  readonly #perTenant: number;
  /** Slots held, by tenant (tenants holding none are absent). */
  readonly #held = new Map<string, number>();
  /**
   * Waiters by tenant, each tenant's in arrival order; the Map's order is the rotation (a Map keeps insertion
   * order).
   */
  readonly #waiting = new Map<string, Set<Wake>>();

  /** `limit` slots in all, at most `perTenant` (default: all of them) held by one tenant. */
  constructor(limit: number, perTenant: number = limit) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new Error(`A gate needs a whole number of slots, at least 1, not ${limit}.`);
    if (!Number.isInteger(perTenant) || perTenant < 1)
      throw new Error(`A gate needs a whole number of slots per tenant, at least 1, not ${perTenant}.`);
    this.#free = limit;
    this.#perTenant = Math.min(perTenant, limit);
  }

  /** Waiters in line, of every tenant. */
  get waiting(): number {
    let n = 0;
    for (const line of this.#waiting.values()) n += line.size;
    return n;
  }

  /** Slots `tenant` holds now. */
  held(tenant: string): number {
    return this.#held.get(tenant) ?? 0;
  }

  /**
   * Takes a slot for `tenant` if one is free and the tenant is below its limit. Never
   * overtakes: while a slot is free, every waiter left is of a tenant at its limit.
   */
  tryTake(tenant: string): boolean {
    if (this.#free === 0 || this.held(tenant) >= this.#perTenant) return false;
    this.#grant(tenant);
    return true;
  }

  /** Waits in `tenant`'s line for a slot; rejects with the signal's reason, out of the line, when it aborts first. */
  take(tenant: string, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.tryTake(tenant)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        const line = this.#waiting.get(tenant);
        line?.delete(wake);
        if (line?.size === 0) this.#waiting.delete(tenant);
        reject(signal?.reason);
      };
      const wake = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      let line = this.#waiting.get(tenant);
      if (line === undefined) this.#waiting.set(tenant, (line = new Set()));
      line.add(wake);
    });
  }

  /** Gives `tenant`'s slot back, and hands free slots to the waiters whose turn it is. */
  release(tenant: string): void {
    const held = this.held(tenant);
    if (held === 0) throw new Error(`Tenant "${tenant}" released a search slot it did not hold.`);
    if (held === 1) this.#held.delete(tenant);
    else this.#held.set(tenant, held - 1);
    this.#free++;
    this.#handOut();
  }

  #grant(tenant: string): void {
    this.#free--;
    this.#held.set(tenant, this.held(tenant) + 1);
  }

  /**
   * While a slot is free: the first tenant in the rotation below its limit gets it for its first waiter, and
   * goes to the back.
   */
  #handOut(): void {
    while (this.#free > 0) {
      let next: [string, Set<Wake>] | undefined;
      for (const entry of this.#waiting) {
        if (this.held(entry[0]) < this.#perTenant) {
          next = entry;
          break;
        }
      }
      if (next === undefined) return;
      const [tenant, line] = next;
      const [wake] = line;
      if (wake === undefined) throw new Error("unreachable: an empty line is removed");
      line.delete(wake);
      this.#waiting.delete(tenant);
      if (line.size > 0) this.#waiting.set(tenant, line);
      this.#grant(tenant);
      wake();
    }
  }
}
