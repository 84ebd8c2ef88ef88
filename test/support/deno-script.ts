/**
 * A script of the repository run under Deno as the service runs there (node_modules as installed, sloppy
 * imports), allowed to read the repository and `dataDir` and to write `dataDir` only: what a storage test checks
 * of Deno's `node:sqlite` and its worker threads.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** Runs `script` (a path from the repository's root) with `args`; resolves with the JSON of its last stdout line. */
export async function runDenoScript(script: string, dataDir: string, args: readonly string[]): Promise<unknown> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      join(ROOT, "scripts/deno.mjs"),
      "run",
      "--no-prompt",
      "--no-lock",
      "--node-modules-dir=manual",
      "--sloppy-imports",
      `--allow-read=${ROOT},${dataDir}`,
      `--allow-write=${dataDir}`,
      "--allow-env",
      join(ROOT, script),
      ...args,
    ],
    { cwd: ROOT, timeout: 120_000 },
  );
  return JSON.parse(stdout.trim().split("\n").at(-1) ?? "");
}
