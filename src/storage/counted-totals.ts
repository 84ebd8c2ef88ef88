/**
 * The counted totals of this process's searches (a COUNT over the matches: several words, several filters,
 * `updatedSince`, a word begun that begins several words), each with the version it was read at: the versions
 * of its terms' counter rows, or the tenant's revision (queries/search.ts, countVersionOf). A search asked
 * again gives its last total back to its statement (totalOf), which answers it without counting when the
 * version is still the same in the statement's own snapshot, and counts when it is not: what is kept here is
 * never trusted, only offered. Paging through a search, or asking it again while nothing it counts was
 * written, then costs a page and not a count of every match (issue 24: two words at a million). Several
 * replicas each keep their own; the database decides for all of them.
 */
import type { KnownTotal } from "./queries/search.js";

/** Totals kept: the newest searches' (in the order they were last answered). */
const MAX_TOTALS = 256;

/** A search whose key is longer (many filter values) is not kept: 256 keys hold at most 1 MiB of text. */
const MAX_KEY_LENGTH = 4_096;

export class CountedTotals {
  readonly #totals = new Map<string, KnownTotal>();

  /** The last total answered for `countKey`, if kept. */
  readonly get = (countKey: string): KnownTotal | undefined => this.#totals.get(countKey);

  /** Keeps what a statement with `countKey` answered, unless a later version's total is kept already. */
  keep(countKey: string, known: KnownTotal): void {
    if (countKey.length > MAX_KEY_LENGTH) return;
    const kept = this.#totals.get(countKey);
    if (kept !== undefined && kept.version > known.version) return;
    this.#totals.delete(countKey);
    this.#totals.set(countKey, known);
    if (this.#totals.size > MAX_TOTALS) {
      const oldest = this.#totals.keys().next();
      if (oldest.done !== true) this.#totals.delete(oldest.value);
    }
  }
}
