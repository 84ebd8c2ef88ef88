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
