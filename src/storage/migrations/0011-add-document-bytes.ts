/**
 * The size of each stored definition's JSON, for the byte budget of a page
 * (issue 25, item 1): a list stops adding definitions to a page once their
 * bytes reach PAGE_MAX_BYTES, and the statement that picks the page's rows
 * must know each row's size without reading the document.
 *
 * MySQL/MariaDB: `document_bytes`, a stored generated column (LENGTH of the
 * LONGBLOB is its byte count), so every writer keeps it without a change and
 * the ALTER fills it for the rows there are. InnoDB keeps a large document
 * off the row, and LENGTH(document) at read time would fetch it whole.
 *
 * SQLite needs no column: `octet_length(document)` is answered from the
 * record's header, without reading the text (OPFLAG_BYTELENARG, SQLite 3.43+),
 * so this migration changes nothing there.
 */
import { dialectOf } from "./dialect.js";
import type { Migration } from "./index.js";

const table = "agent_definitions";
const column = "document_bytes";

export const addDocumentBytes: Migration = {
  name: "0011-add-document-bytes",
  async up(db) {
    if (dialectOf(db) !== "mysql" || (await db.schema.hasColumn(table, column))) return;
    await db.raw(`
      ALTER TABLE ${table}
        ADD COLUMN ${column} BIGINT GENERATED ALWAYS AS (LENGTH(document)) STORED
          COMMENT 'Bytes of the stored JSON (document): what a page of answers costs, read without the document.'
    `);
  },
  async down(db) {
    if (dialectOf(db) !== "mysql" || !(await db.schema.hasColumn(table, column))) return;
    await db.raw(`ALTER TABLE ${table} DROP COLUMN ${column}`);
  },
};
