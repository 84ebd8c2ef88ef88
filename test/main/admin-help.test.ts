/**
 * `npm run admin -- --help` prints the usage and exits 0 without a database; an unknown option is named with the
 * usage, exit 2, never Node's bare argument error (issue 48, item 4).
 */
import { execFile } from "node:child_process";
import { describe, expect, it } from "vitest";
import { npmScriptCommand } from "../support/npm-script.js";

async function admin(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const [node, ...script] = await npmScriptCommand("admin");
  // A DATABASE_URL nothing answers: --help must not need the database.
  const env = { ...process.env, DATABASE_URL: "mysql://root@127.0.0.1:1/none" };
  return await new Promise((done) => {
    execFile(node, [...script, ...args], { env, timeout: 60_000 }, (e, stdout, stderr) =>
      done({ code: e === null ? 0 : typeof e.code === "number" ? e.code : -1, stdout, stderr }),
    );
  });
}

describe("npm run admin", () => {
  it.each([["--help"], ["-h"], ["tenant", "list", "--help"]])("%s: the usage on stdout, exit 0", async (...args) => {
    const run = await admin(args);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^usage:\n {2}npm run admin -- tenant create <name>/);
    expect(run.stderr).toBe("");
  });

  it("an unknown option: named, with the usage, exit 2", async () => {
    const run = await admin(["tenant", "list", "--bogus"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("Unknown option '--bogus'");
    expect(run.stderr).toContain("usage:\n  npm run admin -- tenant create");
    expect(run.stderr).not.toContain("    at ");
  });
});
