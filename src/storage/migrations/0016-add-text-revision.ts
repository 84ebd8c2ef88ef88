/**
 * MariaDB/MySQL: `definition_text` gains `text_revision`, the tenant revision
 * (migration 0015's `mod_revision`) of the version its text was made from.
 *
 * Why: since issue 20 every write holds its tenant's revision counter until
 * its COMMIT ends, and InnoDB does a FULLTEXT index's work at COMMIT, so with
 * the text written in the transaction the tenant's writes ran one at a time
 * through that work (POST of an existing key at 0.54x of its throughput
 * without revisions; BENCHMARKS.md, "Revisions (issue 20, item 1)"). The
 * text is written after COMMIT instead (storage/search-text.ts), and this
 * column is what makes that safe: the text of a later revision is never
 * overwritten by an earlier one that arrives last, and a text older than its
 * version's `mod_revision` (its write never came: the process died, the
 * statement failed) is found and written again.
 *
 * The rows there now were written in their transactions, so each holds its
 * version's text: they take the version's mod_revision. Adding a column to a
 * table with a FULLTEXT index rebuilds the table (MariaDB has no instant ADD
 * COLUMN for it; readers may go on, LOCK=SHARED), once. Run again after a run
 * that died between the two statements, it sets the revisions again.
 *
 * SQLite: nothing (its FTS5 text is written in the transaction: its writers
 * run one at a time, there is no lock to hold shorter).
 */
import { dialectOf } from "./dialect.js";
import type { Migration } from "./index.js";

const table = "definition_text";
const column = "text_revision";

export const addTextRevision: Migration = {
  name: "0016-add-text-revision",
  async up(db) {
    if (dialectOf(db) !== "mysql") return;
    if (!(await db.schema.hasColumn(table, column)))
      await db.raw(`
        ALTER TABLE ${table}
          ADD COLUMN ${column} BIGINT NOT NULL DEFAULT 0
            COMMENT 'The mod_revision of the version this text was made from (written after COMMIT).',
          ALGORITHM=INPLACE, LOCK=SHARED
      `);
    await db.raw(`UPDATE ${table} x JOIN agent_definitions d ON d.seq = x.seq SET x.${column} = d.mod_revision`);
  },
  async down(db) {
    if (dialectOf(db) !== "mysql" || !(await db.schema.hasColumn(table, column))) return;
    await db.raw(`ALTER TABLE ${table} DROP COLUMN ${column}`);
  },
};
