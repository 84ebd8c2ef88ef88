/**
 * What the migrations need to know about the server they run on. The
 * migrations' own copy: runtime code has its own (connection.ts), so a change
 * there never reaches a migration that has shipped (README.md).
 */
import type { Knex } from "knex";

/** The SQL dialect of the database a migration runs on. */
export type Dialect = "mysql" | "sqlite";

/** The dialect of the knex instance (or transaction) a migration was handed. */
export function dialectOf(db: Knex): Dialect {
  // The dialect's own name: the embedded client is a class (storage/sqlite-client.ts), not a name.
  const dialect: unknown = db.client.dialect;
  if (dialect === "mysql") return "mysql";
  if (dialect === "sqlite3") return "sqlite";
  throw new Error(`Unsupported knex dialect: ${String(dialect)}`);
}

/** The MySQL-dialect server's VERSION(). */
export async function serverVersion(db: Knex): Promise<string> {
  // knex.raw on mysql2 answers [rows, fields].
  const [rows] = (await db.raw("SELECT VERSION() AS version")) as [Array<{ version: string }>, unknown];
  return rows[0]?.version ?? "";
}

/** Whether a VERSION() is MariaDB's (which spells some things differently from MySQL 8). */
export function isMariaDb(version: string): boolean {
  return /mariadb/i.test(version);
}

/**
 * The collation that compares key columns byte for byte, trailing spaces
 * included. MySQL's and MariaDB's defaults fold case and pad spaces, so
 * "Agent" and "agent " would be one key; and the two servers name their
 * NO PAD binary collations differently.
 */
export async function exactCollation(db: Knex): Promise<string> {
  const version = await serverVersion(db);
  if (isMariaDb(version)) return "utf8mb4_nopad_bin"; // MariaDB >= 10.2
  const major = Number.parseInt(version, 10);
  if (major >= 8) return "utf8mb4_0900_bin";
  throw new Error(`MySQL ${version} has no NO PAD binary collation; MySQL 8 or MariaDB 10.2+ is required.`);
}

/** Whether `table` has an index named `index` (MySQL 8 has no DROP INDEX IF EXISTS). */
export async function hasIndex(db: Knex, table: string, index: string): Promise<boolean> {
  if (dialectOf(db) === "mysql") {
    const [rows] = (await db.raw(`SHOW INDEX FROM ${table} WHERE Key_name = ?`, [index])) as [unknown[], unknown];
    return rows.length > 0;
  }
  const rows = (await db.raw("SELECT name FROM sqlite_master WHERE type = 'index' AND name = ?", [index])) as unknown[];
  return rows.length > 0;
}
