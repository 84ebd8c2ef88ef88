/**
 * A migration's upgrade test, one step at a time (the Backstage catalog's
 * model): a fresh database migrated to just before the migration, rows seeded
 * as the version before wrote them, the migration run alone, the rows checked,
 * and the migration undone. Each step is knex's `migrate.up`/`migrate.down`
 * with the project's own migration source.
 */
import type { Knex } from "knex";
import { expect } from "vitest";
import { migrationSource, migrations } from "../../../src/storage/migrations/index.js";

const config: Knex.MigratorConfig = { migrationSource, tableName: "knex_migrations" };

/** Runs every migration before the one named `name`, one at a time. */
export async function migrateToJustBefore(db: Knex, name: string): Promise<void> {
  const index = migrations.findIndex((m) => m.name === name);
  if (index < 0) throw new Error(`No migration named ${name}.`);
  for (let i = 0; i < index; i++) await db.migrate.up(config);
  expect(await lastApplied(db)).toBe(migrations[index - 1]?.name);
}

/** Runs the migration named `name`, which must be the next one. */
export async function migrateUp(db: Knex, name: string): Promise<void> {
  await db.migrate.up(config);
  expect(await lastApplied(db)).toBe(name);
}

/** Undoes the migration named `name`, which must be the last one run. */
export async function migrateDown(db: Knex, name: string): Promise<void> {
  expect(await lastApplied(db)).toBe(name);
  await db.migrate.down(config);
}

async function lastApplied(db: Knex): Promise<string | undefined> {
  const row = (await db("knex_migrations").orderBy("id", "desc").first("name")) as { name: string } | undefined;
  return row?.name;
}
