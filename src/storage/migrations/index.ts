/**
 * The schema's history as an ordered list, served to knex by a custom
 * migration source so it works the same from source (tsx), from a bundle and
 * on Deno: no directory scanning, no file-name conventions.
 *
 * The rules of this folder are in README.md: a shipped migration is frozen and
 * imports nothing of the runtime's; a data migration carries its own copy of
 * what it writes. Runtime code imports only migrateToLatest from here.
 */
import type { Knex } from "knex";
import { createTenants } from "./0001-create-tenants.js";
import { seedDefaultTenant } from "./0002-seed-default-tenant.js";
import { createAgents } from "./0003-create-agents.js";
import { createAgentExternalIds } from "./0004-create-agent-external-ids.js";
import { createAgentDefinitions } from "./0005-create-agent-definitions.js";
import { addDefinitionBinary } from "./0006-add-definition-binary.js";
import { reencodeEmptyLists } from "./0007-reencode-empty-lists.js";
import { addDefinitionLifecycle } from "./0008-add-definition-lifecycle.js";
import { addSearchIndex } from "./0009-add-search-index.js";
import { addTermCounts } from "./0010-add-term-counts.js";
import { addDocumentBytes } from "./0011-add-document-bytes.js";
import { addAgentLockCount } from "./0012-add-agent-lock-count.js";
import { addWordTerms } from "./0013-add-word-terms.js";
import { allowUnnumberedDefinitions } from "./0014-allow-unnumbered-definitions.js";
import { addRevisions } from "./0015-add-revisions.js";
import { addTextRevision } from "./0016-add-text-revision.js";
import { addTermVersions } from "./0017-add-term-versions.js";
import { createProviderKeys } from "./0018-create-provider-keys.js";
import { createProviderKeySets } from "./0019-create-provider-key-sets.js";
import { createTenantSettings } from "./0020-create-tenant-settings.js";
import { addDefinitionLiveness } from "./0021-add-definition-liveness.js";
import { dialectOf } from "./dialect.js";
import { type LeaseTimes, withMigrationLease, withNamedLock } from "./migration-lock.js";
import { checkDurability, checkServerSettings } from "./server-settings.js";

/** One schema change. `down` undoes exactly what `up` did. */
export interface Migration {
  /** Recorded in `knex_migrations`; never rename one that has shipped. */
  readonly name: string;
  up(db: Knex): Promise<void>;
  down(db: Knex): Promise<void>;
}

/** Every migration, oldest first. Append only. */
export const migrations: readonly Migration[] = [
  createTenants,
  seedDefaultTenant,
  createAgents,
  createAgentExternalIds,
  createAgentDefinitions,
  addDefinitionBinary,
  reencodeEmptyLists,
  addDefinitionLifecycle,
  addSearchIndex,
  addTermCounts,
  addDocumentBytes,
  addAgentLockCount,
  addWordTerms,
  allowUnnumberedDefinitions,
  addRevisions,
  addTextRevision,
  addTermVersions,
  createProviderKeys,
  createProviderKeySets,
  createTenantSettings,
  addDefinitionLiveness,
];

/** Serves `migrations` to knex's migrator. */
export const migrationSource: Knex.MigrationSource<Migration> = {
  async getMigrations() {
    return [...migrations];
  },
  getMigrationName(migration) {
    return migration.name;
  },
  async getMigration(migration) {
    return { up: (db: Knex) => migration.up(db), down: (db: Knex) => migration.down(db) };
  },
};

const migrationConfig: Knex.MigratorConfig = { migrationSource, tableName: "knex_migrations" };

/**
 * How long to wait for another process that is migrating the same database:
 * 30 minutes, as long as it keeps renewing its lease. 0006 rewrites every
 * definition, about 26 s for 100,000 of them on MariaDB (12 s on SQLite), and
 * a process that starts meanwhile must wait it out rather than fail its start.
 * A process that died holding the lease keeps the others waiting one lease
 * (migration-lock.ts) at most.
 */
const lockWaitMs = 30 * 60_000;
const lockRetryMs = 500;
/** On SQLite, how many times knex's lock is asked for (two minutes). */
const lockAttempts = 240;

/** What a test may change of the runner: the lease's times and the wait (the runtime passes nothing). */
export interface MigrateOptions {
  readonly lease?: LeaseTimes;
  readonly waitMs?: number;
}

/**
 * Brings the schema up to date. Safe to call on every start and from several
 * processes at once, on one server or on the nodes of a Galera cluster.
 *
 * On MySQL the processes take turns by a lease row (migration-lock.ts) that
 * every node sees, which also covers the creation of knex's own tables, where
 * knex's lock cannot help: each finds the schema as the previous one left it.
 * On SQLite, knex's lock table lets one migrate, and the others wait for it
 * here instead of failing (knex does not wait by itself); knex's own tables
 * are made first by one process at a time (makeKnexTablesOnce).
 */
export async function migrateToLatest(db: Knex, options: MigrateOptions = {}): Promise<void> {
  if (dialectOf(db) === "mysql") {
    // On every start, migrations to run or not: a node that would lose acknowledged writes is refused.
    await checkDurability(db);
    const waitMs = options.waitMs ?? lockWaitMs;
    return withMigrationLease(
      db,
      waitMs,
      (lease) =>
        withNamedLock(db, waitMs, async () => {
          if (lease.tookOverFrom !== undefined) await releaseDeadOwnersKnexLock(db);
          await checkServerSettings(db);
          await migrateWaitingForKnexLock(db);
        }),
      options.lease,
    );
  }
  await makeKnexTablesOnce(db);
  return migrateWaitingForKnexLock(db);
}

/**
 * SQLite: knex's own tables, and its lock's one row, made inside one `BEGIN IMMEDIATE` (the database's write
 * lock first, so one process at a time). knex makes them with a look and then a create: four processes starting
 * on a new database both passed the look, and one failed ("table `knex_migrations` already exists"); two lock
 * rows would have locked every later start out (knex takes its lock only when one row changes). The tables are
 * the ones knex makes; the pool has one connection, so the statements run in this transaction.
 */
async function makeKnexTablesOnce(db: Knex): Promise<void> {
  const table = migrationConfig.tableName as string;
  // knex's own DDL for them, made conditional (its createTableIfNotExists is deprecated and warns).
  const ifAbsent = (create: Knex.SchemaBuilder): string =>
    create.toString().replace(/^create table /i, "CREATE TABLE IF NOT EXISTS ");
  const statements = [
    ifAbsent(
      db.schema.createTable(table, (t) => {
        t.increments();
        t.string("name");
        t.integer("batch");
        t.timestamp("migration_time");
      }),
    ),
    ifAbsent(
      db.schema.createTable(`${table}_lock`, (t) => {
        t.increments("index").primary();
        t.integer("is_locked");
      }),
    ),
    `INSERT INTO ${table}_lock (is_locked) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM ${table}_lock)`,
  ];
  await db.raw("BEGIN IMMEDIATE");
  try {
    for (const statement of statements) await db.raw(statement);
    await db.raw("COMMIT");
  } catch (error) {
    await db.raw("ROLLBACK").catch(() => undefined);
    throw error;
  }
}

/**
 * The lease was taken over from a process that stopped renewing it: that
 * process died or lost the database, and knex's lock, if it is set, is its
 * own, left mid-migration (knex frees it on the connection that failed); it
 * would keep every later start waiting and then failing (MigrationLocked)
 * until someone ran `knex migrate:unlock` by hand. Knex's lock is never
 * cleared otherwise: a lease that is renewed belongs to a live process.
 */
async function releaseDeadOwnersKnexLock(db: Knex): Promise<void> {
  if (await db.schema.hasTable(`${migrationConfig.tableName}_lock`))
    await db(`${migrationConfig.tableName}_lock`).update({ is_locked: 0 });
}

async function migrateWaitingForKnexLock(db: Knex): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await db.migrate.latest(migrationConfig);
      return;
    } catch (error) {
      // Another process holds knex's lock (on MySQL: one that died mid-migration without a lease, i.e. of an
      // earlier version; docs/operations.md says how to clear it).
      const locked = (error as { name?: unknown }).name === "MigrationLocked";
      if (!locked) throw error;
      if (attempt >= lockAttempts && dialectOf(db) !== "mysql") throw error;
      if (attempt >= lockAttempts)
        throw new Error(
          `knex's migration lock (${migrationConfig.tableName}_lock.is_locked) has been set for over ` +
            `${(lockAttempts * lockRetryMs) / 1000} s by a process that holds no lease: one of an earlier ` +
            "version, migrating or dead. Once none is running, clear it (docs/operations.md).",
        );
      await new Promise((resolve) => setTimeout(resolve, lockRetryMs));
    }
  }
}

/** Undoes every migration; for tests and for tearing an installation down. */
export async function migrateToNothing(db: Knex): Promise<void> {
  await db.migrate.rollback(migrationConfig, true);
}
