/**
 * A migration's upgrade test, one step at a time (the Backstage catalog's
 * model): a fresh database migrated to just before the migration, rows seeded
 * as the version before wrote them, the migration run alone, the rows checked,
 * and the migration undone. Each step is knex's `migrate.up`/`migrate.down`
 * with the project's own migration source.
 */
import { toBinary, toJsonString } from "@bufbuild/protobuf";
import type { Knex } from "knex";
import { expect } from "vitest";
import { type AgentDefinition, AgentDefinitionSchema } from "../../../gen/asor/v1/agent_definition_pb.js";
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

/** One definition as the versions from 0008 to 0010 stored it, with its agent. */
export interface SeededDefinition {
  readonly seq: number;
  readonly tenant: string;
  readonly def: AgentDefinition;
  readonly status?: "ACTIVE" | "DEPRECATED" | "DEACTIVATED";
  readonly latest?: boolean;
}

/**
 * Inserts `rows` into `agents` and `agent_definitions` in the shape of 0008
 * (the lifecycle columns) and 0006 (both encodings), each its own agent
 * numbered by its seq. The JSON is protobuf-es's: what a migration that reads
 * it must parse whichever version wrote it.
 */
export async function seedDefinitionsAt0008(db: Knex, rows: readonly SeededDefinition[]): Promise<void> {
  const at = "2024-01-02 03:04:05.678";
  const made = rows.map(({ seq, tenant, def, status = "ACTIVE", latest = true }) => {
    const { agent, definition } = rowsAt0005(seq, tenant, def, toJsonString(AgentDefinitionSchema, def), at);
    const lifecycle = { revision: 1, status, status_message: null, status_changed_at: at, is_latest: latest };
    return {
      agent,
      definition: { ...definition, document_binary: Buffer.from(toBinary(AgentDefinitionSchema, def)), ...lifecycle },
    };
  });
  await db.batchInsert(
    "agents",
    made.map((m) => m.agent),
    200,
  );
  await db.batchInsert(
    "agent_definitions",
    made.map((m) => m.definition),
    200,
  );
}

/**
 * The `agents` and `agent_definitions` rows of `def` in the shape of 0005 (the JSON `document` alone),
 * its own agent numbered by `seq`; later shapes add their columns to them.
 */
export function rowsAt0005(seq: number, tenant: string, def: AgentDefinition, document: string, at: string) {
  const provider = def.provider?.id ?? "";
  return {
    agent: {
      tenant,
      number: seq,
      reference_id: def.referenceId,
      provider_id: provider,
      name: def.name,
      created_at: at,
    },
    definition: {
      id: def.id,
      seq,
      tenant,
      name: def.name,
      provider_id: provider,
      version: def.version,
      agent_number: seq,
      document,
      created_at: at,
      updated_at: at,
    },
  };
}

/** The names of the triggers, and of the indexes of `table`, that the database holds. */
export async function schemaNames(db: Knex, table: string): Promise<{ indexes: string[]; triggers: string[] }> {
  if (db.client.dialect === "mysql") {
    const [indexes] = (await db.raw(
      "SELECT DISTINCT INDEX_NAME AS name FROM information_schema.STATISTICS " +
        "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
      [table],
    )) as [Array<{ name: string }>];
    const [triggers] = (await db.raw(
      "SELECT TRIGGER_NAME AS name FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()",
    )) as [Array<{ name: string }>];
    return { indexes: indexes.map((row) => row.name).sort(), triggers: triggers.map((row) => row.name).sort() };
  }
  const indexes = (await db.raw(
    "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
    [table],
  )) as Array<{
    name: string;
  }>;
  const triggers = (await db.raw("SELECT name FROM sqlite_master WHERE type = 'trigger'")) as Array<{ name: string }>;
  return { indexes: indexes.map((row) => row.name).sort(), triggers: triggers.map((row) => row.name).sort() };
}

/** The rows of a raw SELECT: knex.raw answers [rows, fields] on mysql2 and the rows on SQLite. */
export async function rows<T>(db: Knex, sql: string, bindings: readonly (string | number)[] = []): Promise<T[]> {
  const result: unknown = await db.raw(sql, [...bindings]);
  return (db.client.dialect === "mysql" ? (result as [T[]])[0] : result) as T[];
}
