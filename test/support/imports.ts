/**
 * The import statements of the repository's TypeScript files, read from the
 * files as they are on disk: for the tests that hold layers to their rules
 * (the migrations' imports, storage's layers, the request path's direction).
 */
import { readdir, readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

export interface Import {
  /** Repository-relative path of a relative import (`.js` read as `.ts`), else the package name as written. */
  readonly target: string;
  /** The imported names, `type` prefixes left off; empty for a namespace, side-effect or dynamic import. */
  readonly names: readonly string[];
  /** `import type ...` / `export type ...`. */
  readonly typeOnly: boolean;
  readonly statement: string;
}

const fromClause = new RegExp(
  /^[ \t]*(?:import|export)\s+(type\s+)?/.source +
    /((?:[\w$]+\s*,\s*)?(?:\{[^}]*\}|\*(?:\s+as\s+[\w$]+)?|[\w$]+))/.source +
    /\s+from\s*["']([^"']+)["']/.source,
  "gm",
);
const bare = /^[ \t]*import\s*["']([^"']+)["']/gm;
const dynamic = /\bimport\(\s*["']([^"']+)["']\s*\)/g;

/** The imports (and re-exports) of the TypeScript `source` of the repository file `file`. */
export function importsOf(file: string, source: string): Import[] {
  const target = (specifier: string): string =>
    specifier.startsWith(".")
      ? relative(root, resolve(root, dirname(file), specifier)).replace(/\.js$/, ".ts")
      : specifier;
  const found: Import[] = [];
  for (const [statement, type, clause = "", specifier = ""] of source.matchAll(fromClause)) {
    const named = /\{([^}]*)\}/.exec(clause)?.[1] ?? "";
    const names = named
      .split(",")
      .map(
        (name) =>
          name
            .trim()
            .replace(/^type\s+/, "")
            .split(/\s+as\s+/)[0]!,
      )
      .filter((name) => name !== "");
    found.push({ target: target(specifier), names, typeOnly: type !== undefined, statement: statement.trim() });
  }
  for (const [statement, specifier = ""] of [...source.matchAll(bare), ...source.matchAll(dynamic)]) {
    found.push({ target: target(specifier), names: [], typeOnly: false, statement: statement.trim() });
  }
  return found;
}

/** Every TypeScript file under `dir` (repository-relative), with its source. */
export async function sourcesUnder(dir: string): Promise<Array<{ path: string; source: string }>> {
  const entries = await readdir(join(root, dir), { recursive: true, withFileTypes: true });
  const files = entries.filter((entry) => entry.isFile() && entry.name.endsWith(".ts"));
  return Promise.all(
    files.map(async (entry) => {
      const path = relative(root, join(entry.parentPath, entry.name));
      return { path, source: await readFile(join(root, path), "utf8") };
    }),
  );
}
