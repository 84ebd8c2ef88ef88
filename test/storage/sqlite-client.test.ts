/**
 * The embedded database's one knex client (src/storage/sqlite-client.ts) on
 * both runtimes: better-sqlite3 under Node, node:sqlite under Deno. The same
 * probe (test/support/sqlite-probe.ts) runs under each, in its own process,
 * and every failure must reach the repository classified alike, so retries
 * and error answers do not depend on the runtime.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const PROBE = "test/support/sqlite-probe.ts";

/** The probe's command line under each runtime, with the permissions the service has under Deno. */
const commands = {
  node: (dir: string) => [process.execPath, "--import", "tsx", PROBE, dir],
  deno: (dir: string) => [
    process.execPath,
    "scripts/deno.mjs",
    "run",
    "--no-prompt",
    "--no-lock",
    "--node-modules-dir=manual",
    "--sloppy-imports",
    "--allow-env",
    `--allow-read=${["src", "gen", "test", "node_modules"].map((d) => join(ROOT, d)).join(",")},${dir}`,
    `--allow-write=${dir}`,
    PROBE,
    dir,
  ],
};

describe("the embedded database's client on Node and Deno", () => {
  const outcomes: Record<string, Record<string, unknown>> = {};
  const dirs: string[] = [];

  beforeAll(async () => {
    for (const [runtime, command] of Object.entries(commands)) {
      const dir = await mkdtemp(join(tmpdir(), `asor-sqlite-${runtime}-`));
      dirs.push(dir);
      const [file, ...args] = command(dir);
      const { stdout } = await run(file!, args, { cwd: ROOT });
      outcomes[runtime] = JSON.parse(stdout.trim().split("\n").at(-1)!);
    }
  }, 120_000);
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it("classifies a unique or primary key violation as a retryable duplicate key, with better-sqlite3's code", () => {
    for (const runtime of ["node", "deno"]) {
      expect(outcomes[runtime]!.uniqueViolation, runtime).toEqual({
        code: "SQLITE_CONSTRAINT_UNIQUE",
        kind: "retryable",
        duplicateKey: true,
      });
      expect(outcomes[runtime]!.primaryKeyViolation, runtime).toEqual({
        code: "SQLITE_CONSTRAINT_PRIMARYKEY",
        kind: "retryable",
        duplicateKey: true,
      });
    }
  });

  it("classifies a write lock held by another connection (SQLITE_BUSY) as retryable", () => {
    for (const runtime of ["node", "deno"])
      expect(outcomes[runtime]!.busy, runtime).toEqual({ code: "SQLITE_BUSY", kind: "retryable", duplicateKey: false });
  });

  it("classifies a file that cannot grow (SQLITE_FULL, as on a full disk) as unavailable", () => {
    for (const runtime of ["node", "deno"])
      expect(outcomes[runtime]!.full, runtime).toEqual({
        code: "SQLITE_FULL",
        kind: "unavailable",
        duplicateKey: false,
      });
  });

  it("reads BLOBs back byte for byte", () => {
    for (const runtime of ["node", "deno"]) expect(outcomes[runtime]!.blobReadBack, runtime).toEqual([0, 1, 254, 255]);
  });

  it("answers the same on both runtimes, case by case", () => {
    expect(outcomes.deno).toEqual(outcomes.node);
  });
});
