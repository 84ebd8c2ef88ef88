// Types of scripts/long-functions.mjs for the TypeScript that imports it (test/architecture.test.ts).

/** A function longer than the limit: its file (relative to `cwd`), its first line, its name and its length. */
export interface LongFunction {
  readonly path: string;
  readonly line: number;
  readonly name: string;
  readonly lines: number;
}

/**
 * The functions longer than `max` lines (default 80) in the files and folders `roots` (default `["src"]`,
 * relative to `cwd`, the folder of tsconfig.json, default the process's), longest first.
 */
export function longFunctions(options?: { max?: number; roots?: readonly string[]; cwd?: string }): LongFunction[];
