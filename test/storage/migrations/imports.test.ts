/**
 * The import rules of src/storage/migrations/ (its README.md): a migration
 * imports knex, the folder's own files (the Migration type of index.ts only
 * as a type), @bufbuild/protobuf, the generated schema of the definition and
 * node:buffer, nothing of the runtime's; and runtime code imports nothing of
 * the folder but index.ts's migrateToLatest. Read from the import statements
 * of the files as they are on disk.
 */
import { describe, expect, it } from "vitest";
import { importsOf, sourcesUnder } from "../../support/imports.js";

const migrationsDir = "src/storage/migrations";

/** What a migration may import besides the files of its own folder. */
const allowedInMigrations = new Set([
  "knex",
  "@bufbuild/protobuf",
  "node:buffer",
  "gen/asor/v1/agent_definition_pb.ts",
]);

/** What runtime code may import of the folder: the entry that runs the migrations. */
const runtimeEntry = { file: `${migrationsDir}/index.ts`, names: ["migrateToLatest"] };

/** Every break of the folder's rules among `files` (repository-relative path and source). */
function importViolations(files: ReadonlyArray<{ path: string; source: string }>): string[] {
  const broken: string[] = [];
  for (const { path, source } of files) {
    const inFolder = path.startsWith(`${migrationsDir}/`);
    for (const imported of importsOf(path, source)) {
      const intoFolder = imported.target.startsWith(`${migrationsDir}/`);
      if (inFolder) {
        if (intoFolder) {
          if (imported.target === runtimeEntry.file && path !== runtimeEntry.file && !imported.typeOnly) {
            broken.push(`${path}: imports index.ts other than as a type: ${imported.statement}`);
          }
        } else if (!allowedInMigrations.has(imported.target)) {
          broken.push(`${path}: a migration imports from outside its folder: ${imported.statement}`);
        }
      } else if (intoFolder) {
        const entry = imported.target === runtimeEntry.file && imported.names.length > 0;
        if (!entry || imported.names.some((name) => !runtimeEntry.names.includes(name))) {
          broken.push(`${path}: runtime code imports a migration: ${imported.statement}`);
        }
      }
    }
  }
  return broken;
}

describe("the migrations' imports", () => {
  it(
    "are knex, the folder's own files, the definition's schema; " + "runtime code imports only migrateToLatest",
    async () => {
      const files = await sourcesUnder("src");
      // The walk found both sides: the migrations and the runtime code that runs them.
      expect(files.filter((file) => file.path.startsWith(`${migrationsDir}/0`)).length).toBeGreaterThanOrEqual(11);
      expect(files.some((file) => file.path === "src/storage/sql-repository.ts")).toBe(true);
      expect(importViolations(files)).toEqual([]);
    },
  );

  it("are read from every form of import statement, and a break of each rule is caught", () => {
    const migration = `${migrationsDir}/0099-example.ts`;
    const sources = [
      {
        path: migration,
        source:
          'import type { Knex } from "knex";\nimport type { Migration } from "./index.js";\n' +
          'import { dialectOf } from "./dialect.js";',
      },
      { path: migration, source: 'import { encodeDefinition, fromDocument } from "../rows.js";' },
      { path: migration, source: 'import {\n  insertSideRows,\n  type Unindexed,\n} from "../search-index.js";' },
      { path: migration, source: 'import { migrations } from "./index.js";' },
      { path: migration, source: 'export { wordsOf } from "../../domain/list-query.js";' },
      { path: migration, source: 'const rows = await import("../rows.js");' },
      { path: "src/storage/knex-repository.ts", source: 'import { migrateToLatest } from "./migrations/index.js";' },
      {
        path: "src/storage/knex-repository.ts",
        source: 'export { defaultTenant } from "./migrations/0002-seed-default-tenant.js";',
      },
      {
        path: "src/storage/list-search.ts",
        source: 'import { isMariaDb, serverVersion } from "./migrations/dialect.js";',
      },
      {
        path: "src/storage/queries.ts",
        source: 'import { migrateToLatest, migrations } from "./migrations/index.js";',
      },
      { path: "src/storage/queries.ts", source: 'import * as all from "./migrations/index.js";' },
    ];
    expect(importViolations(sources)).toEqual([
      `${migration}: a migration imports from outside its folder: ` +
        'import { encodeDefinition, fromDocument } from "../rows.js"',
      `${migration}: a migration imports from outside its folder: ` +
        'import {\n  insertSideRows,\n  type Unindexed,\n} from "../search-index.js"',
      `${migration}: imports index.ts other than as a type: import { migrations } from "./index.js"`,
      `${migration}: a migration imports from outside its folder: export { wordsOf } from "../../domain/list-query.js"`,
      `${migration}: a migration imports from outside its folder: import("../rows.js")`,
      "src/storage/knex-repository.ts: runtime code imports a migration: " +
        'export { defaultTenant } from "./migrations/0002-seed-default-tenant.js"',
      "src/storage/list-search.ts: runtime code imports a migration: " +
        'import { isMariaDb, serverVersion } from "./migrations/dialect.js"',
      "src/storage/queries.ts: runtime code imports a migration: " +
        'import { migrateToLatest, migrations } from "./migrations/index.js"',
      'src/storage/queries.ts: runtime code imports a migration: import * as all from "./migrations/index.js"',
    ]);
  });
});
