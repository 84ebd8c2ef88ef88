/**
 * One migrating process at a time on a MySQL database, by a named lock.
 *
 * Knex's own migration lock cannot do it on a fresh database: the lock lives
 * in tables knex makes on the way in, by check-then-act. Two processes that
 * start together both find `knex_migrations` missing and both create it (one
 * fails, ER_TABLE_EXISTS_ERROR); or both find `knex_migrations_lock` empty
 * and both insert its row. Knex takes its lock with `UPDATE ... SET
 * is_locked = 1 WHERE is_locked = 0` and wants exactly one row changed: with
 * two rows, no process ever gets the lock again (MigrationLocked, for good).
 *
 * `GET_LOCK` needs no table. It is held by a session, so one connection is
 * taken from the pool for the whole migration and given back after
 * `RELEASE_LOCK` (a connection that dies releases it too); the migration
 * itself runs on the pool as before. The lock's name is per database, so
 * registries on other databases of the same server do not wait for each other.
 */
import type { Knex } from "knex";

/** How long one `GET_LOCK` waits before it is asked again: well under any statement timeout it is given. */
const waitSeconds = 1;

/** What this file uses of a mysql2 connection (the folder imports nothing of the runtime's driver.ts). */
interface MysqlConnection {
  query(
    options: { sql: string; timeout: number },
    values: unknown[],
    callback: (error: Error | null, result: unknown) => void,
  ): void;
}

function query<T>(connection: MysqlConnection, sql: string, values: unknown[] = []): Promise<T> {
  // Its own timeout: the pool's statement timeout (DATABASE_TIMEOUT_MS) may be shorter than a wait.
  return new Promise((resolve, reject) => {
    connection.query({ sql, timeout: (waitSeconds + 10) * 1000 }, values, (error, result) =>
      error === null ? resolve(result as T) : reject(error),
    );
  });
}

/** The lock's name: the database's, hashed to fit MySQL's 64 characters. */
const LOCK_NAME = "CONCAT('asor-migrations-', SHA1(DATABASE()))";

/**
 * Runs `body` holding the database's migration lock, waiting for it at most
 * `timeoutMillis` (another process migrating a large table takes its time).
 */
export async function withMigrationLock<T>(db: Knex, timeoutMillis: number, body: () => Promise<T>): Promise<T> {
  const connection = (await db.client.acquireConnection()) as MysqlConnection;
  try {
    const deadline = Date.now() + timeoutMillis;
    for (;;) {
      const [row] = await query<Array<{ got: number | null }>>(connection, `SELECT GET_LOCK(${LOCK_NAME}, ?) AS got`, [
        waitSeconds,
      ]);
      if (row?.got === 1) break;
      if (row?.got !== 0) throw new Error("GET_LOCK failed for the migration lock.");
      if (Date.now() >= deadline)
        throw new Error(
          `Another process has held this database's migration lock for over ${Math.round(timeoutMillis / 1000)} s.`,
        );
    }
    try {
      return await body();
    } finally {
      await query(connection, `SELECT RELEASE_LOCK(${LOCK_NAME})`);
    }
  } finally {
    await db.client.releaseConnection(connection);
  }
}
