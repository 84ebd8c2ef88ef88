/**
 * Counters per filter value (issue 11, item 8): how many definitions of a
 * tenant carry each (kind, value) of `definition_terms`, per status and
 * is_latest, split over the same 16 shards (seq % 16) as definition_counts.
 * A list filtered by one value (`tag=x`, `provider=y`, ...) then answers its
 * exact `total` from at most 96 counter rows instead of counting every match:
 * a tag on 1 % of a million definitions was a count of 10,000 index entries
 * on every page.
 *
 * Triggers on definition_terms keep the counters, so every writer of a term
 * row moves them in the same statement, with no round trip of its own: the
 * write path's inserts and deletes (search-index.ts), and the status and
 * is_latest copies the update trigger of 0009 rewrites. A definition that is
 * deleted takes its terms along by foreign key, and cascaded deletes fire no
 * triggers on MySQL; so a BEFORE DELETE trigger on agent_definitions deletes
 * the terms itself first, through the counting trigger.
 *
 * It also drops ix_agent_definitions_tenant_seq (tenant, seq): 0009's
 * ix_agent_definitions_list_created (tenant, seq, status, is_latest) begins
 * with the same columns and serves every read it served, and each index is
 * one more B-tree every insert writes.
 */
import type { Knex } from "knex";
import { dialectOf, exactCollation, hasIndex } from "./dialect.js";
import type { Migration } from "./index.js";

/** The shards of the counters, as 0009's definition_counts; the list sums every shard, so the runtime needs no copy. */
const SHARDS = 16;

const counts = "definition_term_counts";
const triggers = [
  "tr_definition_terms_count_insert",
  "tr_definition_terms_count_update",
  "tr_definition_terms_count_delete",
  "tr_agent_definitions_terms_delete",
] as const;
const droppedIndex = { name: "ix_agent_definitions_tenant_seq", columns: "tenant, seq" } as const;

export const addTermCounts: Migration = {
  name: "0010-add-term-counts",
  async up(db) {
    const mysql = dialectOf(db) === "mysql";
    // MySQL commits each DDL statement on its own: every step can be run again after a failed run.
    for (const trigger of triggers) await db.raw(`DROP TRIGGER IF EXISTS ${trigger}`);
    await db.raw(`DROP TABLE IF EXISTS ${counts}`);
    if (mysql) await createMysql(db);
    else await createSqlite(db);
    await backfill(db, mysql);
    await createTriggers(db, mysql);
    if (await hasIndex(db, "agent_definitions", droppedIndex.name))
      await db.raw(mysql ? `DROP INDEX ${droppedIndex.name} ON agent_definitions` : `DROP INDEX ${droppedIndex.name}`);
  },
  async down(db) {
    for (const trigger of triggers) await db.raw(`DROP TRIGGER IF EXISTS ${trigger}`);
    await db.raw(`DROP TABLE IF EXISTS ${counts}`);
    await db.raw(`CREATE INDEX ${droppedIndex.name} ON agent_definitions (${droppedIndex.columns})`);
  },
};

async function createMysql(db: Knex): Promise<void> {
  const collation = await exactCollation(db);
  const text = `CHARACTER SET utf8mb4 COLLATE ${collation}`;
  await db.raw(`
    CREATE TABLE ${counts} (
      tenant VARCHAR(63) ${text} NOT NULL COMMENT 'The tenant.',
      kind TINYINT UNSIGNED NOT NULL COMMENT 'definition_terms.kind.',
      value VARCHAR(255) ${text} NOT NULL COMMENT 'definition_terms.value.',
      status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL COMMENT 'A status.',
      is_latest BOOLEAN NOT NULL COMMENT 'An is_latest value.',
      shard TINYINT UNSIGNED NOT NULL COMMENT 'seq % ${SHARDS}: spreads concurrent writers over rows.',
      n BIGINT NOT NULL COMMENT 'How many definitions with seq % ${SHARDS} = shard carry this value, with this status and is_latest.',
      PRIMARY KEY (tenant, kind, value, status, is_latest, shard)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
      COMMENT='Definitions per filter value, status and is_latest, kept by triggers on definition_terms: a filtered list''s total.'
  `);
}

async function createSqlite(db: Knex): Promise<void> {
  await db.raw(`
    CREATE TABLE ${counts} (
      tenant VARCHAR(63) NOT NULL,
      kind INTEGER NOT NULL,
      value VARCHAR(255) NOT NULL,
      status VARCHAR(16) NOT NULL,
      is_latest BOOLEAN NOT NULL,
      shard INTEGER NOT NULL,
      n INTEGER NOT NULL,
      CONSTRAINT pk_definition_term_counts PRIMARY KEY (tenant, kind, value, status, is_latest, shard)
    ) WITHOUT ROWID
  `);
}

/** Definitions (by seq) counted per statement: each statement stays well inside DATABASE_TIMEOUT_MS. */
const backfillSeqs = 20_000;

/**
 * Counts the terms there are, before the triggers exist, a range of seqs per
 * statement (one statement over a million definitions' 14 million terms took
 * longer than a statement may). Ranges add into the same counter rows, as
 * shards mix seqs. Nothing else writes while a migration runs (migration-lock.ts
 * on MySQL; knex's lock and SQLite's single writer on SQLite).
 */
async function backfill(db: Knex, mysql: boolean): Promise<void> {
  const [{ top } = { top: 0 }] = (await db("definition_terms").max({ top: "seq" })) as Array<{
    top: number | string | null;
  }>;
  const add = mysql
    ? "ON DUPLICATE KEY UPDATE n = n + VALUES(n)"
    : "ON CONFLICT (tenant, kind, value, status, is_latest, shard) DO UPDATE SET n = n + excluded.n";
  for (let from = 0; from <= Number(top ?? 0); from += backfillSeqs) {
    // SQLite needs a WHERE in an INSERT ... SELECT with an upsert clause (its parser would read ON as a
    // join's); it has one.
    await db.raw(
      `INSERT INTO ${counts} (tenant, kind, value, status, is_latest, shard, n)
       SELECT tenant, kind, value, status, is_latest, seq % ${SHARDS}, COUNT(*) FROM definition_terms WHERE seq >= ? AND seq < ?
       GROUP BY tenant, kind, value, status, is_latest, seq % ${SHARDS} ${add}`,
      [from, from + backfillSeqs],
    );
  }
}

async function createTriggers(db: Knex, mysql: boolean): Promise<void> {
  const bump = (row: "NEW" | "OLD", delta: "+ 1" | "- 1") =>
    `INSERT INTO ${counts} (tenant, kind, value, status, is_latest, shard, n) VALUES (${row}.tenant, ${row}.kind, ${row}.value, ${row}.status, ${row}.is_latest, ${row}.seq % ${SHARDS}, 0 ${delta}) ${
      mysql ? "ON DUPLICATE KEY UPDATE" : "ON CONFLICT (tenant, kind, value, status, is_latest, shard) DO UPDATE SET"
    } n = n ${delta};`;
  // BEGIN ... END on both: MySQL needs it for two statements, SQLite for any.
  const body = (statements: string) => `BEGIN ${statements} END`;
  await db.raw(
    `CREATE TRIGGER ${triggers[0]} AFTER INSERT ON definition_terms FOR EACH ROW ${body(bump("NEW", "+ 1"))}`,
  );
  await db.raw(
    `CREATE TRIGGER ${triggers[1]} AFTER UPDATE ON definition_terms FOR EACH ROW ${body(`${bump("OLD", "- 1")} ${bump("NEW", "+ 1")}`)}`,
  );
  await db.raw(
    `CREATE TRIGGER ${triggers[2]} AFTER DELETE ON definition_terms FOR EACH ROW ${body(bump("OLD", "- 1"))}`,
  );
  await db.raw(
    `CREATE TRIGGER ${triggers[3]} BEFORE DELETE ON agent_definitions FOR EACH ROW ${body("DELETE FROM definition_terms WHERE seq = OLD.seq;")}`,
  );
}
