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
 * countVersionOf).
 *
 * The rows there now start at 0: the sum still grows from there at every
 * change. MariaDB adds the column at the end without copying the table
 * (instant ADD COLUMN), and replaces each trigger in one statement (CREATE
 * OR REPLACE TRIGGER), so the writes of processes that still serve during a
 * rolling upgrade move the counters all along: `v` from the moment its
 * trigger is replaced. MySQL 8 has no OR REPLACE for triggers: there each is
 * dropped and made again, and a write between the two statements would move
 * no counter, so upgrade MySQL 8 with the writers stopped. SQLite's DDL runs
 * in the migration's transaction. Run again after a run that died halfway,
 * it completes: the column is added if it is not there, and the triggers are
 * replaced whatever they are.
 */
import type { Knex } from "knex";
import { dialectOf, isMariaDb, serverVersion } from "./dialect.js";
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
    const replace = mysql && isMariaDb(await serverVersion(db));
    if (!(await db.schema.hasColumn(counts, column)))
      await db.raw(
        mysql
          ? `ALTER TABLE ${counts} ADD COLUMN ${column} BIGINT NOT NULL DEFAULT 0 ` +
              "COMMENT 'How many times this counter row moved: its term rows changed (0017).'"
          : `ALTER TABLE ${counts} ADD COLUMN ${column} INTEGER NOT NULL DEFAULT 0`,
      );
    await createTriggers(db, { mysql, replace }, true);
  },
  async down(db) {
    const mysql = dialectOf(db) === "mysql";
    await createTriggers(db, { mysql, replace: mysql && isMariaDb(await serverVersion(db)) }, false);
    if (await db.schema.hasColumn(counts, column)) await db.raw(`ALTER TABLE ${counts} DROP COLUMN ${column}`);
  },
};

/**
 * definition_terms' counting triggers as 0010 made them, and with `versions` also moving `v`: each replaced in
 * one statement where the server can (`replace`, MariaDB), else dropped and made again.
 */
async function createTriggers(
  db: Knex,
  { mysql, replace }: { mysql: boolean; replace: boolean },
  versions: boolean,
): Promise<void> {
  const bump = (row: "NEW" | "OLD", delta: "+ 1" | "- 1") =>
    `INSERT INTO ${counts} (tenant, kind, value, status, is_latest, shard, n${versions ? `, ${column}` : ""}) ` +
    `VALUES (${row}.tenant, ${row}.kind, ${row}.value, ${row}.status, ${row}.is_latest, ${row}.seq % ${SHARDS}, ` +
    `0 ${delta}${versions ? ", 1" : ""}) ` +
    `${mysql ? "ON DUPLICATE KEY UPDATE" : "ON CONFLICT (tenant, kind, value, status, is_latest, shard) DO UPDATE SET"} ` +
    `n = n ${delta}${versions ? `, ${column} = ${column} + 1` : ""};`;
  const body = (statements: string) => `BEGIN ${statements} END`;
  const make = async (trigger: string, event: string, statements: string) => {
    if (!replace) await db.raw(`DROP TRIGGER IF EXISTS ${trigger}`);
    const create = `CREATE ${replace ? "OR REPLACE " : ""}TRIGGER ${trigger}`;
    await db.raw(`${create} AFTER ${event} ON definition_terms FOR EACH ROW ${body(statements)}`);
  };
  await make(triggers[0], "INSERT", bump("NEW", "+ 1"));
  await make(triggers[1], "UPDATE", `${bump("OLD", "- 1")} ${bump("NEW", "+ 1")}`);
  await make(triggers[2], "DELETE", bump("OLD", "- 1"));
}
