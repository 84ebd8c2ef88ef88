/**
 * A budget of bytes held at once, taken in turn (issue 50, item 1): what every watcher's replay of the change log
 * holds in memory together (WATCH_REPLAY_MAX_BYTES). A taker waits, first come first served, until its bytes fit;
 * one larger than the whole budget goes alone. A lease is given back once, whichever way its holder ends.
 */
export interface ByteGate {
  /** WATCH_REPLAY_MAX_BYTES. */
  readonly limit: number;
  /** Bytes held by leases now. */
  readonly used: number;
  /** Takers waiting for their turn. */
  readonly waiting: number;
  /** Takers that waited their whole `waitMs` in vain, since the start. */
  readonly refused: number;
  /**
   * Resolves with a lease of `bytes` once they fit (at once when nothing waits before it and they fit now). Rejects
   * with `signal`'s reason when it aborts first, and with `timedOut()` when `waitMs` pass first (no limit when
   * undefined); a rejected taker holds nothing.
   */
  take(
    bytes: number,
    options?: { signal?: AbortSignal | undefined; waitMs?: number; timedOut?: () => Error },
  ): Promise<Lease>;
}

export interface Lease {
  /** Gives the bytes back; only the first call counts. */
  release(): void;
}

interface Waiter {
  readonly bytes: number;
  readonly grant: () => void;
}

export function createByteGate(limit: number): ByteGate {
  let used = 0;
  let refused = 0;
  const waiters: Waiter[] = [];
  const fits = (bytes: number) => used === 0 || used + bytes <= limit;
  /** Grants the waiters at the head that fit, in order: a large one is not passed by smaller ones behind it. */
  const pump = () => {
    while (waiters.length > 0 && fits((waiters[0] as Waiter).bytes)) (waiters.shift() as Waiter).grant();
  };
  const leaseOf = (bytes: number): Lease => {
    used += bytes;
    let released = false;
    return {
      release() {
        if (released) return;
        released = true;
        used -= bytes;
        pump();
      },
    };
  };
  return {
    limit,
    get used() {
      return used;
    },
    get waiting() {
      return waiters.length;
    },
    get refused() {
      return refused;
    },
    take(bytes, { signal, waitMs, timedOut } = {}) {
      if (signal?.aborted === true) return Promise.reject(signal.reason);
      if (waiters.length === 0 && fits(bytes)) return Promise.resolve(leaseOf(bytes));
      return new Promise<Lease>((resolve, reject) => {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const leave = (reason: unknown) => {
          const at = waiters.indexOf(waiter);
          if (at !== -1) waiters.splice(at, 1);
          settle();
          reject(reason);
          // The head may have been the one that did not fit.
          pump();
        };
        const onAbort = () => leave(signal?.reason);
        const settle = () => {
          if (timer !== undefined) clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
        };
        const waiter: Waiter = {
          bytes,
          grant: () => {
            settle();
            resolve(leaseOf(bytes));
          },
        };
        waiters.push(waiter);
        signal?.addEventListener("abort", onAbort, { once: true });
        if (waitMs !== undefined)
          timer = setTimeout(() => {
            refused++;
            leave(timedOut?.() ?? new Error("Timed out waiting for the byte budget."));
          }, waitMs);
      });
    },
  };
}
