/**
 * The registry's own metadata of each definition (issue 11, items 1-4), kept
 * in columns beside the document, never inside it: what the publisher sent
 * stays as it was sent, and the answers splice `meta` in from these columns.
 *
 * - `revision`: 1 on create, +1 on every change of content or status; the
 *   ETag is made from it.
 * - `status`, `status_message`, `status_changed_at`: the lifecycle
 *   (ACTIVE, DEPRECATED, DEACTIVATED; any may follow any).
 * - `is_latest`: true for the newest version (highest seq) of an agent that
 *   is not DEACTIVATED. Every write that creates a version or changes a status
 *   recomputes it for the agent under the agent's lock, so it is exact at each
 *   commit; reads take it as it is, and `Agent_ID=` references resolve through
 *   it (ix_agent_definitions_agent_latest, which also orders an agent's
 *   versions newest first when none is latest).
 *
 * Every existing row is ACTIVE at migration time, revision 1, its status
 * changed when it was created.
 */
import type { Knex } from "knex";
import { dialectOf, hasIndex } from "./dialect.js";
import type { Migration } from "./index.js";

const table = "agent_definitions";
const index = "ix_agent_definitions_agent_latest";

export const addDefinitionLifecycle: Migration = {
  name: "0008-add-definition-lifecycle",
  async up(db) {
    // MySQL commits DDL on its own: a run that failed after the ALTER finds the columns and
    // only backfills (both backfills are idempotent).
    if (!(await db.schema.hasColumn(table, "is_latest"))) await addColumns(db);
    await backfill(db);
    if (!(await hasIndex(db, table, index)))
      await db.raw(`CREATE INDEX ${index} ON ${table} (tenant, agent_number, is_latest, seq)`);
  },
  async down(db) {
    if (dialectOf(db) === "mysql") {
      await db.raw(`
        ALTER TABLE ${table}
          DROP INDEX ${index},
          DROP COLUMN revision,
          DROP COLUMN status,
          DROP COLUMN status_message,
          DROP COLUMN status_changed_at,
          DROP COLUMN is_latest
      `);
    } else {
      await db.raw(`DROP INDEX IF EXISTS ${index}`);
      for (const column of ["revision", "status", "status_message", "status_changed_at", "is_latest"])
        await db.raw(`ALTER TABLE ${table} DROP COLUMN ${column}`);
    }
  },
};

async function addColumns(db: Knex): Promise<void> {
  if (dialectOf(db) === "mysql") {
    // One statement, so all or nothing. status_changed_at gets a default only to fill the existing
    // rows (MySQL 8's NO_ZERO_DATE refuses the implicit zero date), replaced by created_at below and
    // then dropped: every write sets it.
    await db.raw(`
      ALTER TABLE ${table}
        ADD COLUMN revision INT NOT NULL DEFAULT 1
          COMMENT '1 on create, +1 on every change of content or status; the ETag is made from it.',
        ADD COLUMN status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'ACTIVE'
          COMMENT 'ACTIVE, DEPRECATED or DEACTIVATED.',
        ADD COLUMN status_message TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL
          COMMENT 'Why the status was set, when the caller said; null otherwise.',
        ADD COLUMN status_changed_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
          COMMENT 'When the status was last set (UTC); the creation time until then.',
        ADD COLUMN is_latest BOOLEAN NOT NULL DEFAULT FALSE
          COMMENT 'True for the newest version (highest seq) of its agent that is not DEACTIVATED; kept by every write.'
    `);
  } else {
    // SQLite adds a NOT NULL column only with a constant default; the backfill replaces it.
    await db.raw(`ALTER TABLE ${table} ADD COLUMN revision INTEGER NOT NULL DEFAULT 1`);
    await db.raw(`ALTER TABLE ${table} ADD COLUMN status VARCHAR(16) NOT NULL DEFAULT 'ACTIVE'`);
    await db.raw(`ALTER TABLE ${table} ADD COLUMN status_message TEXT NULL`);
    await db.raw(`ALTER TABLE ${table} ADD COLUMN status_changed_at DATETIME NOT NULL DEFAULT ''`);
    await db.raw(`ALTER TABLE ${table} ADD COLUMN is_latest BOOLEAN NOT NULL DEFAULT 0`);
  }
}

async function backfill(db: Knex): Promise<void> {
  if (dialectOf(db) === "mysql") {
    await db.raw(`UPDATE ${table} SET status_changed_at = created_at WHERE revision = 1 AND status = 'ACTIVE'`);
    await db.raw(`ALTER TABLE ${table} ALTER COLUMN status_changed_at DROP DEFAULT`);
    // MySQL cannot select from the table an UPDATE changes except through a derived table.
    await db.raw(`
      UPDATE ${table} d
      JOIN (SELECT MAX(seq) AS seq FROM ${table} WHERE status <> 'DEACTIVATED' GROUP BY tenant, agent_number) n ON n.seq = d.seq
      SET d.is_latest = TRUE
    `);
  } else {
    await db.raw(`UPDATE ${table} SET status_changed_at = created_at WHERE status_changed_at = ''`);
    await db.raw(
      `UPDATE ${table} SET is_latest = 1 WHERE seq IN (SELECT MAX(seq) FROM ${table} WHERE status <> 'DEACTIVATED' GROUP BY tenant, agent_number)`,
    );
  }
}
