/**
 * `definition_term_counts` (0010) gains `v`: how many times its counter row
 * has moved. Every insert, update and delete of a term row adds 1 to the `v`
 * of each counter row it moves (the triggers of 0010, made again here with
 * the one more assignment), and counter rows are never deleted, so the sum of
 * `v` over a filter value's counter rows grows at every change of that
 * value's term rows, whatever the change (a new match, a lost one, a status
 * or is_latest copied anew), and at nothing else.
 *
 * Why (issue 24): a search whose total is a COUNT (two words, two filters)
 * kept its total by the tenant's revision, so any write in the tenant made
 * the next call count every match again: 13x its cost at a thousand, at a
 * million. A COUNT over term rows depends on the term rows of its own
 * values only, so the sum of their `v` says whether it can have moved:
 * a write elsewhere in the tenant leaves it (queries/search.ts,
 * termVersionOf).
 *
 * The rows there now start at 0: the sum still grows from there at every
 * change. MariaDB adds the column in place without copying the table
 * (instant ADD COLUMN); its triggers are dropped and made again in two DDL
 * statements each, so a write between the two would move `n` without `v` on
 * a server that is serving: migrations run before their process serves, and
 * one process migrates at a time (migration-lock.ts). Run again after a run
 * that died halfway, it completes: the column is added if it is not there,
 * and the triggers are dropped first.
 */
import type { Knex } from "knex";
import { dialectOf } from "./dialect.js";
import type { Migration } from "./index.js";

const counts = "definition_term_counts";
const column = "v";
const triggers = [
  "tr_definition_terms_count_insert",
  "tr_definition_terms_count_update",
  "tr_definition_terms_count_delete",
] as const;
/** 0010's 16 counter shards (frozen: the migrations' own copy). */
const SHARDS = 16;

export const addTermVersions: Migration = {
  name: "0017-add-term-versions",
  async up(db) {
    const mysql = dialectOf(db) === "mysql";
    if (!(await db.schema.hasColumn(counts, column)))
      await db.raw(
        mysql
          ? `ALTER TABLE ${counts} ADD COLUMN ${column} BIGINT NOT NULL DEFAULT 0 ` +
              "COMMENT 'How many times this counter row moved: its term rows changed (0017).'"
          : `ALTER TABLE ${counts} ADD COLUMN ${column} INTEGER NOT NULL DEFAULT 0`,
      );
    await createTriggers(db, mysql, true);
  },
  async down(db) {
    const mysql = dialectOf(db) === "mysql";
    await createTriggers(db, mysql, false);
    if (await db.schema.hasColumn(counts, column)) await db.raw(`ALTER TABLE ${counts} DROP COLUMN ${column}`);
  },
};

/** definition_terms' counting triggers as 0010 made them, and with `versions` also moving `v`. */
async function createTriggers(db: Knex, mysql: boolean, versions: boolean): Promise<void> {
  const bump = (row: "NEW" | "OLD", delta: "+ 1" | "- 1") =>
    `INSERT INTO ${counts} (tenant, kind, value, status, is_latest, shard, n${versions ? `, ${column}` : ""}) ` +
    `VALUES (${row}.tenant, ${row}.kind, ${row}.value, ${row}.status, ${row}.is_latest, ${row}.seq % ${SHARDS}, 0 ${delta}${versions ? ", 1" : ""}) ${
      mysql ? "ON DUPLICATE KEY UPDATE" : "ON CONFLICT (tenant, kind, value, status, is_latest, shard) DO UPDATE SET"
    } n = n ${delta}${versions ? `, ${column} = ${column} + 1` : ""};`;
  const body = (statements: string) => `BEGIN ${statements} END`;
  for (const trigger of triggers) await db.raw(`DROP TRIGGER IF EXISTS ${trigger}`);
  await db.raw(
    `CREATE TRIGGER ${triggers[0]} AFTER INSERT ON definition_terms FOR EACH ROW ${body(bump("NEW", "+ 1"))}`,
  );
  await db.raw(
    `CREATE TRIGGER ${triggers[1]} AFTER UPDATE ON definition_terms FOR EACH ROW ${body(`${bump("OLD", "- 1")} ${bump("NEW", "+ 1")}`)}`,
  );
  await db.raw(
    `CREATE TRIGGER ${triggers[2]} AFTER DELETE ON definition_terms FOR EACH ROW ${body(bump("OLD", "- 1"))}`,
  );
}
