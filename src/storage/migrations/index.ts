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
import { dialectOf } from "./dialect.js";
import { withMigrationLock } from "./migration-lock.js";

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
 * How long to wait for another process that is migrating the same database: two minutes.
 * 0006 rewrites every definition, about 26 s for 100,000 of them on MariaDB (12 s on SQLite),
 * and a process that starts meanwhile must wait it out rather than fail its start.
 */
const lockAttempts = 240;
const lockRetryMillis = 500;

/**
 * Brings the schema up to date. Safe to call on every start and from several
 * processes at once. On MySQL the processes take turns by a named lock
 * (migration-lock.ts), which also covers the creation of knex's own tables,
 * where knex's lock cannot help: each finds the schema as the previous one
 * left it. On SQLite, knex's lock table lets one migrate, and the others wait
 * for it here instead of failing (knex does not wait by itself).
 */
export async function migrateToLatest(db: Knex): Promise<void> {
  if (dialectOf(db) === "mysql") {
    return withMigrationLock(db, lockAttempts * lockRetryMillis, async () => {
      await releaseStaleKnexLock(db);
      await migrateWaitingForKnexLock(db);
    });
  }
  return migrateWaitingForKnexLock(db);
}

/**
 * Holding the named lock, no other process of ours is migrating this
 * database; so knex's lock, if set, was left by one that died or lost its
 * connection mid-migration (knex frees it on the connection that failed),
 * and would keep every later start waiting and then failing (MigrationLocked)
 * until someone ran `knex migrate:unlock` by hand. The one case this would
 * misjudge is a process of a version without the named lock (before the
 * hardening that added it; none was released) migrating at the same moment.
 */
async function releaseStaleKnexLock(db: Knex): Promise<void> {
  if (await db.schema.hasTable(`${migrationConfig.tableName}_lock`))
    await db(`${migrationConfig.tableName}_lock`).update({ is_locked: 0 });
}

async function migrateWaitingForKnexLock(db: Knex): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await db.migrate.latest(migrationConfig);
      return;
    } catch (error) {
      // Another process holds knex's lock (on MySQL: one of an earlier version, which takes no named lock).
      const locked = (error as { name?: unknown }).name === "MigrationLocked";
      if (!locked || attempt >= lockAttempts) throw error;
      await new Promise((resolve) => setTimeout(resolve, lockRetryMillis));
    }
  }
}

/** Undoes every migration; for tests and for tearing an installation down. */
export async function migrateToNothing(db: Knex): Promise<void> {
  await db.migrate.rollback(migrationConfig, true);
}
