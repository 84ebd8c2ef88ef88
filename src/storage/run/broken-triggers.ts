/**
 * A MariaDB node whose table cache holds a table with broken triggers, and how the write path recovers.
 *
 * MariaDB parses a table's triggers (migrations 0009 and 0010: on agent_definitions and definition_terms)
 * each time it opens a new instance of the table, for any statement, a SELECT too. When that statement
 * is interrupted meanwhile, the parse stops where it is ("Query was empty", or a syntax error "near" any
 * point of the text), and the instance is kept in the table cache with its triggers marked unparseable:
 * every INSERT, UPDATE or DELETE that then gets it and reaches a row, on any connection, fails with
 * ER_PARSE_ERROR (1064) "Trigger '...' (or: Unknown trigger) has an error in its body: '...'" until it
 * leaves the cache (a FLUSH, DDL on the table, eviction from table_open_cache). The triggers as stored
 * are intact. MariaDB 10.11, without Galera: a statement stopped by max_statement_time (as run/searches.ts
 * stops searches) or KILL QUERY while it opens the table does it (test/storage/broken-triggers.test.ts).
 * On a Galera node a brute-force abort (another node's write needed the transaction's locks) stops it
 * the same way: test/cluster/failover.test.ts answered hundreds of writes INTERNAL so (docs/galera.md).
 * `FLUSH LOCAL TABLES` of those tables drops the cached instances; the next statement parses again.
 */
import type { Knex } from "knex";

/** The tables with triggers: a cached instance of either may hold them broken. */
export const TRIGGER_TABLES: readonly string[] = ["agent_definitions", "definition_terms"];

/**
 * Drops the node's cached instances of the tables with triggers (on a connection of `db`'s pool, so on the
 * node the pool now uses), waiting at most `waitSeconds` for the transactions that use them: `FLUSH TABLES`
 * of a table waits for every open transaction that used it. LOCAL: not written to the binary log, so not
 * replicated either; the other nodes' caches are their own. Needs the RELOAD privilege.
 */
export async function reloadTriggers(db: Knex, waitSeconds: number): Promise<void> {
  const seconds = Math.max(1, Math.trunc(waitSeconds));
  await db.raw(`SET STATEMENT lock_wait_timeout = ${seconds} FOR FLUSH LOCAL TABLES ${TRIGGER_TABLES.join(", ")}`);
}

/**
 * One reload at a time in a process, run while none of its writes is under way.
 *
 * A `FLUSH TABLES` of a table waits for every open transaction that used it; meanwhile every statement that
 * opens the table waits for the flush, and such a transaction's next statement on it fails as a deadlock
 * (1213; MariaDB 10.11, by hand: a transaction that had read the table, a flush, then its UPDATE). So each
 * writer that met the broken instance reloading on its own failed the node's other writers under way, which
 * ran again, met the instance and flushed in turn: presumably what a fresh-clone CI run of
 * test/cluster/revisions.test.ts met, where all 20 concurrent creates through one of three nodes answered
 * 409 or 503 at the end of their budget (inferred: that run kept no log).
 * Write attempts run under this gate (`attempt`); a reload waits until those under way have ended (each
 * either committed or rolled back: they hold no table then), flushes once for all the writers that asked
 * for it meanwhile, and only then lets new attempts begin. An attempt that met broken triggers but began
 * before a reload that has ended since does not flush again: that reload dropped the instance it met.
 */
export class TriggerReloads {
  /** Write attempts under way. */
  #active = 0;
  /** Reloads ended: what an attempt began after. */
  #generation = 0;
  /** The reload waiting for the attempts under way or flushing: new attempts wait for it. */
  #reload: Promise<void> | undefined;
  /** Wakes the waiting reload when the last attempt under way ends. */
  #drained: (() => void) | undefined;

  /** Runs one write attempt once no reload is waiting or under way; `run` is given the reloads ended so far. */
  async attempt<T>(run: (generation: number) => Promise<T>): Promise<T> {
    while (this.#reload !== undefined) await this.#reload.catch(() => undefined);
    this.#active++;
    try {
      return await run(this.#generation);
    } finally {
      this.#active--;
      if (this.#active === 0) this.#drained?.();
    }
  }

  /**
   * Reloads for an attempt (begun at `generation`, ended) that met broken triggers, with `flush`: joins the
   * reload already waiting, if any, or waits for the attempts under way and flushes. Rejects as `flush`
   * does. Answers false without flushing when a reload has ended since the attempt began.
   */
  async reload(generation: number, flush: () => Promise<void>): Promise<boolean> {
    if (this.#reload === undefined && generation !== this.#generation) return false;
    this.#reload ??= this.#flushWhenDrained(flush);
    await this.#reload;
    return true;
  }

  async #flushWhenDrained(flush: () => Promise<void>): Promise<void> {
    try {
      if (this.#active > 0) await new Promise<void>((resolve) => (this.#drained = resolve));
      this.#drained = undefined;
      await flush();
      this.#generation++;
    } finally {
      this.#reload = undefined;
    }
  }
}
