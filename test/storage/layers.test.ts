/**
 * The rules of src/storage/ (its README.md), read from the import statements
 * of the files as they are on disk: only storage imports knex and the
 * database drivers; queries/ takes nothing but types from run/; the layers
 * above storage see the repository's interface, not its SQL.
 */
import { describe, expect, it } from "vitest";
import { importsOf, sourcesUnder } from "../support/imports.js";

const drivers = new Set(["knex", "mysql2", "mysql2/promise", "better-sqlite3", "node:sqlite"]);

describe("storage's layers", () => {
  it("keeps knex and the drivers inside src/storage", async () => {
    const outside = (await sourcesUnder("src")).filter((file) => !file.path.startsWith("src/storage/"));
    expect(outside.length).toBeGreaterThan(20);
    const offending = outside.flatMap((file) =>
      importsOf(file.path, file.source)
        .filter((i) => drivers.has(i.target))
        .map((i) => `${file.path}: ${i.statement}`),
    );
    expect(offending).toEqual([]);
  });

  it("lets queries/ take only types from run/, so SQL text never depends on how it runs", async () => {
    const queries = (await sourcesUnder("src/storage/queries")).filter((file) => file.path.endsWith(".ts"));
    expect(queries.length).toBeGreaterThan(3);
    const offending = queries.flatMap((file) =>
      importsOf(file.path, file.source)
        .filter((i) => i.target.startsWith("src/storage/run/") && !i.typeOnly)
        .map((i) => `${file.path}: ${i.statement}`),
    );
    expect(offending).toEqual([]);
  });

  it("shows the layers above storage its interface only (repository.ts, and the factory that makes it)", async () => {
    const above = (await sourcesUnder("src")).filter((file) => !file.path.startsWith("src/storage/"));
    const allowed = new Set(["src/storage/repository.ts", "src/storage/sql-repository.ts"]);
    const offending = above.flatMap((file) =>
      importsOf(file.path, file.source)
        .filter((i) => i.target.startsWith("src/storage/") && !allowed.has(i.target) && !i.typeOnly)
        .map((i) => `${file.path}: ${i.statement}`),
    );
    expect(offending).toEqual([]);
  });
});
