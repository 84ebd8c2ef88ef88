/**
 * The side tables that serve the list's filters, its keyword search and its
 * totals from indexes (issue 11, items 5, 6 and 8), never by scanning the
 * documents:
 *
 * - `definition_terms`: one row per (definition, kind, value) an exact filter
 *   matches (name, provider, platform, version, skill tags, skill ids,
 *   execution modes, host resource ids, externalAgentID; search-index.ts
 *   makes them from the definition), with the definition's tenant, status and
 *   is_latest copied in, so a filter, its status, its order by seq and its
 *   count all come from one index range (ix_definition_terms_lookup).
 * - the keyword text: on MariaDB `definition_text` with an InnoDB FULLTEXT
 *   index, on SQLite the FTS5 table `definition_fts` (rowid = seq), each with
 *   tenant, status and is_latest beside the text. The text is lower-cased and
 *   reduced to words (letters and digits) by search-index.ts, so both engines
 *   see the same words. MariaDB's index is built without stopwords (they are
 *   fixed when the index is made): "the" is a word like any other.
 * - `definition_counts`: how many definitions each tenant has per status and
 *   is_latest, split over 16 shards (seq % 16) so concurrent inserts rarely
 *   touch the same counter row; the unfiltered list's total is a sum of at
 *   most 96 rows instead of a COUNT(*) over a million.
 *
 * Triggers on agent_definitions keep the copies exact: an insert or delete
 * moves the counters, and an update that changes status or is_latest (the
 * lifecycle's writes, whoever makes them) moves the counters and rewrites the
 * copies in the side tables, in the same transaction. The terms and text of a
 * definition are written by the write path itself (search-index.ts's
 * indexDefinition) after it inserts or updates the row; deleting a definition
 * takes its side rows along (foreign keys ON DELETE CASCADE; the FTS5 table
 * by the delete trigger).
 *
 * Three more indexes on agent_definitions serve the unfiltered list in each
 * order (createdAt, updatedAt, name) with status and is_latest inside the
 * index, so skipping a deactivated row needs no row read.
 *
 * Existing definitions are indexed here, in batches, from their stored JSON,
 * by this migration's frozen copy of the write path's indexing
 * (frozen/0009-side-rows.ts).
 */
import { fromJsonString } from "@bufbuild/protobuf";
import type { Knex } from "knex";
import { AgentDefinitionSchema } from "../../../gen/asor/v1/agent_definition_pb.js";
import { dialectOf, exactCollation, hasIndex } from "./dialect.js";
import { insertSideRows } from "./frozen/0009-side-rows.js";
import type { Migration } from "./index.js";

/**
 * The shards of definition_counts' counters. The list sums every shard of a
 * counter, so the runtime needs no copy; 0010's counters use 16 too.
 */
const SHARDS = 16;

const definitions = "agent_definitions";
/** Rows decoded and indexed per batch. */
const backfillBatch = 500;

const listIndexes = [
  ["ix_agent_definitions_list_created", "tenant, seq, status, is_latest"],
  ["ix_agent_definitions_list_updated", "tenant, updated_at, seq, status, is_latest"],
  ["ix_agent_definitions_list_name", "tenant, name, seq, status, is_latest"],
] as const;

const triggers = [
  "tr_agent_definitions_search_insert",
  "tr_agent_definitions_search_update",
  "tr_agent_definitions_search_delete",
] as const;

export const addSearchIndex: Migration = {
  name: "0009-add-search-index",
  async up(db) {
    // A run that died halfway left what it had made, and no record (MySQL commits each DDL statement on its
    // own): its triggers and side tables go, to be made again from the definitions, which nothing else
    // writes while a migration runs. What it writes is the same (README.md, "Run again").
    await dropSideTables(db);
    if (dialectOf(db) === "mysql") await upMysql(db);
    else await upSqlite(db);
    await backfill(db);
  },
  async down(db) {
    const mysql = dialectOf(db) === "mysql";
    await dropSideTables(db);
    for (const [name] of listIndexes)
      await db.raw(mysql ? `DROP INDEX ${name} ON ${definitions}` : `DROP INDEX IF EXISTS ${name}`);
  },
};

async function dropSideTables(db: Knex): Promise<void> {
  const mysql = dialectOf(db) === "mysql";
  for (const trigger of triggers) await db.raw(`DROP TRIGGER IF EXISTS ${trigger}`);
  for (const table of ["definition_counts", "definition_terms", mysql ? "definition_text" : "definition_fts"])
    await db.raw(`DROP TABLE IF EXISTS ${table}`);
}

async function upMysql(db: Knex): Promise<void> {
  const collation = await exactCollation(db);
  const text = `CHARACTER SET utf8mb4 COLLATE ${collation}`;
  const status = "VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL";
  await db.raw(`
    CREATE TABLE definition_terms (
      seq BIGINT UNSIGNED NOT NULL COMMENT 'agent_definitions.seq of the definition.',
      kind TINYINT UNSIGNED NOT NULL COMMENT 'What the value is: search-index.ts TERM_KINDS (1 name, 2 provider, 3 platform, 4 version, 5 tag, 6 skillId, 7 executionMode, 8 resource, 9 externalAgentID).',
      value VARCHAR(255) ${text} NOT NULL COMMENT 'The value, compared exactly.',
      tenant VARCHAR(63) ${text} NOT NULL COMMENT 'Copy of the definition''s tenant.',
      status ${status} COMMENT 'Copy of the definition''s status, kept by trigger.',
      is_latest BOOLEAN NOT NULL COMMENT 'Copy of the definition''s is_latest, kept by trigger.',
      PRIMARY KEY (seq, kind, value),
      KEY ix_definition_terms_lookup (tenant, kind, value, seq, status, is_latest),
      CONSTRAINT fk_definition_terms_definition FOREIGN KEY (seq) REFERENCES ${definitions} (seq) ON DELETE CASCADE
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
      COMMENT='What the exact filters of the list match: one row per definition, kind and value.'
  `);
  // Stopwords are fixed into a FULLTEXT index when it is made; without them every word is a word.
  await db.raw("SET SESSION innodb_ft_enable_stopword = OFF");
  await db.raw(`
    CREATE TABLE definition_text (
      seq BIGINT UNSIGNED NOT NULL COMMENT 'agent_definitions.seq of the definition.',
      tenant VARCHAR(63) ${text} NOT NULL COMMENT 'Copy of the definition''s tenant.',
      status ${status} COMMENT 'Copy of the definition''s status, kept by trigger.',
      is_latest BOOLEAN NOT NULL COMMENT 'Copy of the definition''s is_latest, kept by trigger.',
      body MEDIUMTEXT ${text} NOT NULL COMMENT 'The words of the name, description, overview and skills (names, descriptions, tags), lower case, space-separated.',
      PRIMARY KEY (seq),
      FULLTEXT KEY ft_definition_text_body (body),
      CONSTRAINT fk_definition_text_definition FOREIGN KEY (seq) REFERENCES ${definitions} (seq) ON DELETE CASCADE
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
      COMMENT='The keyword search of the list (q), one row per definition.'
  `);
  await db.raw("SET SESSION innodb_ft_enable_stopword = ON");
  await db.raw(`
    CREATE TABLE definition_counts (
      tenant VARCHAR(63) ${text} NOT NULL COMMENT 'The tenant.',
      status ${status} COMMENT 'A status.',
      is_latest BOOLEAN NOT NULL COMMENT 'An is_latest value.',
      shard TINYINT UNSIGNED NOT NULL COMMENT 'seq % ${SHARDS}: spreads concurrent inserts over rows.',
      n BIGINT NOT NULL COMMENT 'How many definitions of the tenant with this status and is_latest have seq % ${SHARDS} = shard.',
      PRIMARY KEY (tenant, status, is_latest, shard)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=${collation}
      COMMENT='Definitions per tenant, status and is_latest, kept by triggers: the unfiltered list''s total.'
  `);
  await db.raw(`
    INSERT INTO definition_counts (tenant, status, is_latest, shard, n)
    SELECT tenant, status, is_latest, seq % ${SHARDS}, COUNT(*) FROM ${definitions} GROUP BY tenant, status, is_latest, seq % ${SHARDS}
  `);
  const bump = (row: "NEW" | "OLD", delta: "+ 1" | "- 1") =>
    `INSERT INTO definition_counts (tenant, status, is_latest, shard, n) VALUES (${row}.tenant, ${row}.status, ${row}.is_latest, ${row}.seq % ${SHARDS}, 0 ${delta}) ON DUPLICATE KEY UPDATE n = n ${delta};`;
  await db.raw(
    `CREATE TRIGGER tr_agent_definitions_search_insert AFTER INSERT ON ${definitions} FOR EACH ROW ${bump("NEW", "+ 1")}`,
  );
  await db.raw(`
    CREATE TRIGGER tr_agent_definitions_search_update AFTER UPDATE ON ${definitions} FOR EACH ROW
    BEGIN
      IF NOT (OLD.status <=> NEW.status AND OLD.is_latest <=> NEW.is_latest) THEN
        ${bump("OLD", "- 1")}
        ${bump("NEW", "+ 1")}
        UPDATE definition_terms SET status = NEW.status, is_latest = NEW.is_latest WHERE seq = NEW.seq;
        UPDATE definition_text SET status = NEW.status, is_latest = NEW.is_latest WHERE seq = NEW.seq;
      END IF;
    END
  `);
  await db.raw(
    `CREATE TRIGGER tr_agent_definitions_search_delete AFTER DELETE ON ${definitions} FOR EACH ROW ${bump("OLD", "- 1")}`,
  );
  // The ones a run that died halfway did not make yet (one ALTER makes all three, or none).
  const missing = [];
  for (const index of listIndexes) if (!(await hasIndex(db, definitions, index[0]))) missing.push(index);
  if (missing.length > 0)
    await db.raw(
      `ALTER TABLE ${definitions} ${missing.map(([name, columns]) => `ADD INDEX ${name} (${columns})`).join(", ")}`,
    );
}

async function upSqlite(db: Knex): Promise<void> {
  await db.raw(`
    CREATE TABLE definition_terms (
      seq INTEGER NOT NULL CONSTRAINT fk_definition_terms_definition REFERENCES ${definitions} (seq) ON DELETE CASCADE,
      kind INTEGER NOT NULL,
      value VARCHAR(255) NOT NULL,
      tenant VARCHAR(63) NOT NULL,
      status VARCHAR(16) NOT NULL,
      is_latest BOOLEAN NOT NULL,
      CONSTRAINT pk_definition_terms PRIMARY KEY (seq, kind, value)
    ) WITHOUT ROWID
  `);
  await db.raw(
    "CREATE INDEX ix_definition_terms_lookup ON definition_terms (tenant, kind, value, seq, status, is_latest)",
  );
  // rowid = agent_definitions.seq. unicode61 without diacritics folding: the words are exact (lower case), as
  // on MariaDB.
  await db.raw(
    "CREATE VIRTUAL TABLE definition_fts USING fts5(body, tenant UNINDEXED, status UNINDEXED, is_latest UNINDEXED, tokenize = 'unicode61 remove_diacritics 0')",
  );
  await db.raw(`
    CREATE TABLE definition_counts (
      tenant VARCHAR(63) NOT NULL,
      status VARCHAR(16) NOT NULL,
      is_latest BOOLEAN NOT NULL,
      shard INTEGER NOT NULL,
      n INTEGER NOT NULL,
      CONSTRAINT pk_definition_counts PRIMARY KEY (tenant, status, is_latest, shard)
    ) WITHOUT ROWID
  `);
  await db.raw(`
    INSERT INTO definition_counts (tenant, status, is_latest, shard, n)
    SELECT tenant, status, is_latest, seq % ${SHARDS}, COUNT(*) FROM ${definitions} GROUP BY tenant, status, is_latest, seq % ${SHARDS}
  `);
  const bump = (row: "NEW" | "OLD", delta: "+ 1" | "- 1") =>
    `INSERT INTO definition_counts (tenant, status, is_latest, shard, n) VALUES (${row}.tenant, ${row}.status, ${row}.is_latest, ${row}.seq % ${SHARDS}, 0 ${delta}) ON CONFLICT (tenant, status, is_latest, shard) DO UPDATE SET n = n ${delta};`;
  await db.raw(
    `CREATE TRIGGER tr_agent_definitions_search_insert AFTER INSERT ON ${definitions} BEGIN ${bump("NEW", "+ 1")} END`,
  );
  await db.raw(`
    CREATE TRIGGER tr_agent_definitions_search_update AFTER UPDATE OF status, is_latest ON ${definitions}
    WHEN NOT (OLD.status IS NEW.status AND OLD.is_latest IS NEW.is_latest)
    BEGIN
      ${bump("OLD", "- 1")}
      ${bump("NEW", "+ 1")}
      UPDATE definition_terms SET status = NEW.status, is_latest = NEW.is_latest WHERE seq = NEW.seq;
      UPDATE definition_fts SET status = NEW.status, is_latest = NEW.is_latest WHERE rowid = NEW.seq;
    END
  `);
  await db.raw(`
    CREATE TRIGGER tr_agent_definitions_search_delete AFTER DELETE ON ${definitions}
    BEGIN
      ${bump("OLD", "- 1")}
      DELETE FROM definition_fts WHERE rowid = OLD.seq;
    END
  `);
  for (const [name, columns] of listIndexes)
    await db.raw(`CREATE INDEX IF NOT EXISTS ${name} ON ${definitions} (${columns})`);
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Indexes every existing definition, in batches in seq order, from its stored JSON. */
async function backfill(db: Knex): Promise<void> {
  const dialect = dialectOf(db);
  for (let after: number | string = 0; ; ) {
    const rows = (await db(definitions)
      .select(["seq", "tenant", "status", "is_latest", "document"])
      .where("seq", ">", after)
      .orderBy("seq", "asc")
      .limit(backfillBatch)) as Array<{
      seq: number | string;
      tenant: string;
      status: string;
      is_latest: number | boolean;
      document: string | Uint8Array;
    }>;
    if (rows.length === 0) return;
    const unindexed = rows.map((row) => ({
      seq: row.seq,
      tenant: row.tenant,
      status: row.status,
      latest: Boolean(row.is_latest),
      // Frozen (issue 23): what rows.ts's fromDocument did when this shipped; fields a later schema dropped
      // are ignored.
      definition: fromJsonString(
        AgentDefinitionSchema,
        typeof row.document === "string" ? row.document : utf8.decode(row.document),
        { ignoreUnknownFields: true },
      ),
    }));
    await insertSideRows(dialect, (sql, bindings) => db.raw(sql, bindings), unindexed);
    after = rows[rows.length - 1]!.seq;
  }
}
