/**
 * The process-wide budget of what writes of definitions hold in memory at
 * once (MAX_BUFFERED_WRITE_BYTES, issue 50): as the body budget bounds the
 * bytes of requests being read (edge/body-budget.ts), this bounds what their
 * writes make from them, weighed by their terms (write-admission.ts). Four
 * POSTs of ~950 KB of distinct words at once ended the process on MariaDB
 * (heap limit). A write that would take the budget past its limit waits, in
 * arrival order, until earlier writes end; one larger than the whole budget
 * runs alone. Waiting holds nothing but the request itself, whose body the
 * body budget counts already.
 */

export interface WriteBudget {
  /** MAX_BUFFERED_WRITE_BYTES. */
  readonly limit: number;
  /** Bytes held by writes now. */
  readonly used: number;
  /** Writes waiting for their turn now. */
  readonly waiting: number;
  /** Resolves when `bytes` may be held, with the function that gives them back (only its first call counts). */
  take(bytes: number): Promise<() => void>;
}

export function createWriteBudget(limit: number): WriteBudget {
  let used = 0;
  const queue: Array<{ readonly bytes: number; admit(): void }> = [];
  // Alone, whatever its size: a write larger than the budget must still run.
  const fits = (bytes: number): boolean => used === 0 || used + bytes <= limit;
  const releaser = (bytes: number): (() => void) => {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      used -= bytes;
      // In arrival order: a large write at the head is not overtaken for ever by small ones behind it.
      while (queue.length > 0 && fits(queue[0]!.bytes)) {
        const next = queue.shift()!;
        used += next.bytes;
        next.admit();
      }
    };
  };
  return {
    limit,
    get used() {
      return used;
    },
    get waiting() {
      return queue.length;
    },
    take(bytes) {
      if (queue.length === 0 && fits(bytes)) {
        used += bytes;
        return Promise.resolve(releaser(bytes));
      }
      return new Promise((resolve) => queue.push({ bytes, admit: () => resolve(releaser(bytes)) }));
    },
  };
}
