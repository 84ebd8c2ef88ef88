/**
 * `asor` as its users run it: the built program (dist/src/cli/asor.js, package.json's "bin") in a child
 * process, with its exit code, stdout and stderr.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { builtDist } from "./npm-script.js";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
export const ASOR = join(ROOT, "dist", "src", "cli", "asor.js");

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `asor args...` (dist/ built first when stale) with `env` over this process's, in the checkout. */
export async function asor(args: readonly string[], env: Record<string, string> = {}): Promise<CliRun> {
  await builtDist();
  return await new Promise((done) => {
    execFile(
      process.execPath,
      [ASOR, ...args],
      { cwd: ROOT, env: { ...process.env, NO_COLOR: "", ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1;
        done({ code, stdout, stderr });
      },
    );
  });
}

/** `asor ... --output json`'s document. */
export async function asorJson(args: readonly string[], env: Record<string, string> = {}) {
  const run = await asor([...args, "--output", "json"], env);
  let json: unknown;
  try {
    json = JSON.parse(run.stdout);
  } catch {
    throw new Error(`asor ${args.join(" ")}: exit ${run.code}, not JSON: ${run.stdout}\n${run.stderr}`);
  }
  return { ...run, json: json as Record<string, unknown> & { steps?: { action: string; fields?: string[] }[] } };
}

/** A temporary directory, removed by the returned function. */
export async function tempDir(): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "asor-test-"));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}
