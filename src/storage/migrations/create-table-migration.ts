import { dialectOf, exactCollation } from "./dialect.js";
import type { Migration } from "./index.js";

/** The SQL that creates one table, per dialect. */
export interface TableSql {
  /**
   * One CREATE TABLE for MySQL/MariaDB. `text` is the character set and exact
   * collation of text key columns; `collation` the collation alone.
   */
  mysql(text: string, collation: string): string;
  /** The statements for SQLite: the table, then its indexes. */
  readonly sqlite: readonly string[];
}

/**
 * A migration that creates one table, written as SQL per dialect rather than
 * with knex's schema builder: the builder adds MySQL keys and foreign keys
 * with separate ALTER statements, and MySQL commits each DDL statement on its
 * own, so a failure halfway would leave a table without its unique key. One
 * CREATE TABLE is all or nothing. Each statement says IF NOT EXISTS: a start
 * that died after it and before knex recorded the migration left the table,
 * and the next start runs the migration again.
 */
export function createTableMigration(name: string, table: string, sql: TableSql): Migration {
  return {
    name,
    async up(db) {
      if (dialectOf(db) === "mysql") {
        // The collation comes from exactCollation's fixed list, never from input.
        const collation = await exactCollation(db);
        await db.raw(sql.mysql(`CHARACTER SET utf8mb4 COLLATE ${collation}`, collation));
      } else {
        for (const statement of sql.sqlite) await db.raw(statement);
      }
    },
    async down(db) {
      await db.schema.dropTable(table);
    },
  };
}
