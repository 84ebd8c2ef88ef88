/**
 * A column every write that locks an agent raises (issue 21, item 5): on a
 * Galera cluster a row lock holds on every node only for a row the
 * transaction writes. `SELECT ... FOR UPDATE` locks the row on the node it
 * runs on and nowhere else, and Galera certifies only the rows a transaction
 * changed (an UPDATE that leaves the row as it was changes none): two writers
 * of one agent's versions on two nodes each held "the agent's lock" and both
 * committed, and an agent whose versions were all deactivated ended with two
 * latest versions. Raising this column in place of the locking read makes the
 * agent's row part of every such write, so two of them on different nodes
 * fail certification and one is tried again.
 *
 * MySQL/MariaDB only: SQLite's writers run one at a time and take no row
 * locks. `ADD COLUMN` with a constant default is instant on MariaDB 10.3+ and
 * MySQL 8.0.12+: no rows are rewritten.
 */
import { dialectOf } from "./dialect.js";
import type { Migration } from "./index.js";

const table = "agents";
const column = "lock_count";

export const addAgentLockCount: Migration = {
  name: "0012-add-agent-lock-count",
  async up(db) {
    if (dialectOf(db) !== "mysql" || (await db.schema.hasColumn(table, column))) return;
    await db.raw(`
      ALTER TABLE ${table}
        ADD COLUMN ${column} BIGINT UNSIGNED NOT NULL DEFAULT 0
          COMMENT 'Raised by every write that locks the agent (a new version, a status change): on Galera a lock holds cluster-wide only on a row the transaction writes.'
    `);
  },
  async down(db) {
    if (dialectOf(db) !== "mysql" || !(await db.schema.hasColumn(table, column))) return;
    await db.raw(`ALTER TABLE ${table} DROP COLUMN ${column}`);
  },
};
