import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { npmScriptCommand } from "../support/npm-script.js";

const run = promisify(execFile);

describe("npm run admin", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });
  const admin = async (dataDir: string, ...args: string[]) => {
    try {
      const [node, ...script] = await npmScriptCommand("admin");
      const { stdout, stderr } = await run(node, [...script, ...args], {
        env: { ...process.env, DATA_DIR: dataDir, DATABASE_URL: "" },
      });
      return { code: 0, stdout, stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };

  it("creates tenants with and without a sequence generator, lists them, and refuses a duplicate", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "asor-admin-"));
    dirs.push(dataDir);
    const created = await admin(dataDir, "tenant", "create", "acme", "--sequence-prefix", "ACME-");
    expect(created.code).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ name: "acme", sequencePrefix: "ACME-", nextAgentNumber: 1 });
    expect((await admin(dataDir, "tenant", "create", "plain")).code).toBe(0);
    const listed = await admin(dataDir, "tenant", "list");
    expect(
      listed.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).name),
    ).toEqual(["acme", "default", "plain"]);
    const again = await admin(dataDir, "tenant", "create", "acme");
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^TENANT_EXISTS: /);
  });

  it("prints its usage for anything else, with exit code 2", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "asor-admin-"));
    dirs.push(dataDir);
    const res = await admin(dataDir, "tenant", "delete", "acme");
    expect(res.code).toBe(2);
    expect(res.stderr).toContain("npm run admin -- tenant create");
  });
});
