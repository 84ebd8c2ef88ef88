/**
 * One migrating process at a time on a MySQL database, whichever node of a
 * Galera cluster each process talks to: a lease in a row of its own table.
 *
 * Knex's own migration lock cannot do it on a fresh database: the lock lives
 * in tables knex makes on the way in, by check-then-act. Two processes that
 * start together both find `knex_migrations` missing and both create it (one
 * fails, ER_TABLE_EXISTS_ERROR); or both find `knex_migrations_lock` empty
 * and both insert its row. Knex takes its lock with `UPDATE ... SET
 * is_locked = 1 WHERE is_locked = 0` and wants exactly one row changed: with
 * two rows, no process ever gets the lock again (MigrationLocked, for good).
 *
 * `GET_LOCK`, which the versions before this one took, locks one server: on
 * a Galera cluster each node has its own, and processes on different nodes
 * migrated at once (issue 21). `SELECT ... FOR UPDATE` is no better there
 * (row locks are not seen by the other nodes). What every node sees is a
 * committed write: the lease is taken by a conditional UPDATE of the one row
 * of `registry_migration_lock`, `... SET owner = me WHERE owner IS NULL` (or
 * `WHERE expires_at < now`, the lease of a process that stopped renewing it),
 * committed on its own; one changed row means taken. Under Galera two nodes
 * that take it at once conflict at certification and one of them is told
 * ER_LOCK_DEADLOCK, so it asks again and finds the row taken.
 *
 * The owner renews the lease while it migrates and gives it back (its own
 * row only: `WHERE owner = me`). A lease is taken from another owner only
 * once it has expired, that is when its owner stopped renewing it for a
 * whole lease: it died or lost the database. Renewing needs a connection of
 * the pool besides the migration's; the expiry compares the clocks of the
 * hosts, which must agree (NTP) to well within a lease.
 *
 * The table is made race-free: CREATE TABLE IF NOT EXISTS, then INSERT
 * IGNORE of the one row (DDL under Galera is in total order on every node).
 *
 * Holding the lease, a process also takes `GET_LOCK` as the earlier versions
 * did, so that one of them starting on the same server during a rolling
 * upgrade waits instead of migrating alongside (they know no lease). On a
 * Galera cluster this covers only the node it is taken on: stop the
 * processes of earlier versions before the first start of this one there
 * (docs/operations.md).
 */
import type { Knex } from "knex";

/** The lease's table: one row, id 1. */
export const LEASE_TABLE = "registry_migration_lock";

/** How long a lease lasts without being renewed, and how often its owner renews it. */
export interface LeaseTimes {
  readonly leaseMs: number;
  readonly renewMs: number;
  /** How long a process waits between two attempts at taking a lease held by another. */
  readonly pollMs: number;
}

/**
 * A minute, renewed every 10 s: five renewals may fail (a busy pool, a node
 * changing primary component, a Galera DDL holding commits back) before the
 * lease can be taken over; and a process that died mid-migration keeps the
 * others waiting a minute at most.
 */
export const defaultLeaseTimes: LeaseTimes = { leaseMs: 60_000, renewMs: 10_000, pollMs: 500 };

/** What a process learns when it takes the lease. */
export interface Lease {
  /** The owner id this process wrote. */
  readonly owner: string;
  /** The owner whose expired lease was taken over, when it was. */
  readonly tookOverFrom: string | undefined;
}

/** A process's owner id: unique enough among the processes of one database, readable in the table. */
function newOwner(): string {
  const pid = (globalThis as { process?: { pid?: number } }).process?.pid ?? 0;
  return `pid ${pid} ${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * ER_LOCK_DEADLOCK (a Galera certification conflict says this too) and
 * ER_LOCK_WAIT_TIMEOUT: the statement lost a race and may be run again.
 */
function isRetryable(error: unknown): boolean {
  const errno = (error as { errno?: unknown }).errno;
  return errno === 1213 || errno === 1205;
}

async function retrying<T>(step: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (error) {
      if (!isRetryable(error) || attempt >= 20) throw error;
      await sleep(Math.random() * 50 * Math.min(attempt, 10));
    }
  }
}

/** Makes the lease's table and its row if they are not there; safe from any number of processes at once. */
export async function ensureLeaseTable(db: Knex): Promise<void> {
  await db.raw(`
    CREATE TABLE IF NOT EXISTS ${LEASE_TABLE} (
      id TINYINT UNSIGNED NOT NULL COMMENT 'Always 1: the one row.',
      owner VARCHAR(100) CHARACTER SET ascii COLLATE ascii_bin NULL
        COMMENT 'The process migrating the database; NULL when none is.',
      expires_at BIGINT NULL COMMENT 'When the owner''s lease ends unless renewed (ms since 1970, the owner''s clock).',
      PRIMARY KEY (id)
    ) ENGINE=InnoDB COMMENT='The migration lease: one process migrates at a time (migrations/migration-lock.ts).'
  `);
  await retrying(() => db.raw(`INSERT IGNORE INTO ${LEASE_TABLE} (id, owner, expires_at) VALUES (1, NULL, NULL)`));
}

/** Takes the lease if it is free or expired; undefined when another process holds it. */
export async function tryTakeLease(db: Knex, owner: string, leaseMs: number): Promise<Lease | undefined> {
  const now = Date.now();
  const free = await retrying(() =>
    db(LEASE_TABLE)
      .where({ id: 1 })
      .whereNull("owner")
      .update({ owner, expires_at: now + leaseMs }),
  );
  if (free === 1) return { owner, tookOverFrom: undefined };
  const [held] = (await db(LEASE_TABLE).where({ id: 1 }).select("owner", "expires_at")) as Array<{
    owner: string | null;
    expires_at: number | string | null;
  }>;
  if (held === undefined || held.owner === null || Number(held.expires_at) >= now) return undefined;
  // Expired: taken over only if it is still the same owner's same lease (another may have been quicker).
  const expired = await retrying(() =>
    db(LEASE_TABLE)
      .where({ id: 1, owner: held.owner, expires_at: held.expires_at })
      .update({ owner, expires_at: now + leaseMs }),
  );
  return expired === 1 ? { owner, tookOverFrom: held.owner } : undefined;
}

/** Who holds the lease now, and until when (for the message of a start that waited too long). */
async function holder(db: Knex): Promise<string> {
  const [row] = (await db(LEASE_TABLE).where({ id: 1 }).select("owner", "expires_at")) as Array<{
    owner: string | null;
    expires_at: number | string | null;
  }>;
  return row?.owner === null || row === undefined
    ? "nobody"
    : `${row.owner} (lease until ${new Date(Number(row.expires_at)).toISOString()})`;
}

/**
 * Runs `body` holding the database's migration lease, waiting for it at most
 * `waitMs` (a process that migrates a large table takes its time, and
 * renews its lease meanwhile). The lease is renewed while `body` runs and
 * given back after; `body` learns whose expired lease was taken over.
 * Throws after `body` when the lease was lost meanwhile (not renewed for a
 * whole lease, and taken over): another process may have migrated too.
 */
export async function withMigrationLease<T>(
  db: Knex,
  waitMs: number,
  body: (lease: Lease) => Promise<T>,
  times: LeaseTimes = defaultLeaseTimes,
): Promise<T> {
  await ensureLeaseTable(db);
  const owner = newOwner();
  const deadline = Date.now() + waitMs;
  let lease: Lease | undefined;
  for (;;) {
    lease = await tryTakeLease(db, owner, times.leaseMs);
    if (lease !== undefined) break;
    if (Date.now() >= deadline)
      throw new Error(
        `Another process has held this database's migration lease (table ${LEASE_TABLE}) for over ` +
          `${Math.round(waitMs / 1000)} s: ${await holder(db)}.`,
      );
    await sleep(times.pollMs);
  }
  let lost = false;
  let renewing: Promise<void> = Promise.resolve();
  const renew = async (): Promise<void> => {
    try {
      const changed = await db(LEASE_TABLE)
        .where({ id: 1, owner })
        .update({ expires_at: Date.now() + times.leaseMs });
      if (changed !== 1) lost = true;
    } catch {
      // The next renewal tries again; a lease outlives several failed ones.
    }
  };
  const timer = setInterval(() => {
    renewing = renewing.then(renew);
  }, times.renewMs);
  try {
    const result = await body(lease);
    await renewing;
    if (lost)
      throw new Error(
        `This process lost the migration lease (table ${LEASE_TABLE}) while migrating: it could not renew it ` +
          `for ${times.leaseMs / 1000} s, and another process may have migrated at the same time.`,
      );
    return result;
  } finally {
    clearInterval(timer);
    await renewing;
    await retrying(() => db(LEASE_TABLE).where({ id: 1, owner }).update({ owner: null, expires_at: null }));
  }
}

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

/** The named lock of the earlier versions: the database's name, hashed to fit MySQL's 64 characters. */
const LOCK_NAME = "CONCAT('asor-migrations-', SHA1(DATABASE()))";

/**
 * Runs `body` holding the named lock the earlier versions migrated under
 * (`GET_LOCK`, one server's), waiting for it at most `timeoutMs`. It is
 * held by a session, so one connection is taken from the pool for the whole
 * migration and given back after `RELEASE_LOCK` (a connection that dies
 * releases it too); the migration itself runs on the pool.
 */
export async function withNamedLock<T>(db: Knex, timeoutMs: number, body: () => Promise<T>): Promise<T> {
  const connection = (await db.client.acquireConnection()) as MysqlConnection;
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const [row] = await query<Array<{ got: number | null }>>(connection, `SELECT GET_LOCK(${LOCK_NAME}, ?) AS got`, [
        waitSeconds,
      ]);
      if (row?.got === 1) break;
      if (row?.got !== 0) throw new Error("GET_LOCK failed for the migration lock.");
      if (Date.now() >= deadline)
        throw new Error(
          `A process of an earlier version has held this database's migration lock (GET_LOCK) for over ` +
            `${Math.round(timeoutMs / 1000)} s.`,
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
