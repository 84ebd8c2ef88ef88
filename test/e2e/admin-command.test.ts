import { execFile } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
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

  it("sets, lists and revokes a provider's keys, and reads and changes a tenant's settings", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "asor-admin-"));
    dirs.push(dataDir);
    const jwk = (kid: string, extra: Record<string, string> = {}) => ({
      ...(generateKeyPairSync("ed25519").publicKey.export({ format: "jwk" }) as Record<string, string>),
      kid,
      alg: "EdDSA",
      ...extra,
    });
    const file = join(dataDir, "jwks.json");
    await writeFile(file, JSON.stringify({ keys: [jwk("k1"), jwk("k2")] }));
    const set = await admin(dataDir, "provider-keys", "set", "default", "Provider=acme", file);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout).keys.map((k: { kid: string }) => k.kid)).toEqual(["k1", "k2"]);
    const revoked = await admin(dataDir, "provider-keys", "revoke", "default", "Provider=acme", "k1");
    expect(JSON.parse(revoked.stdout).keys.map((k: { kid: string }) => k.kid)).toEqual(["k2"]);
    const listed = JSON.parse((await admin(dataDir, "provider-keys", "list", "default", "Provider=acme")).stdout);
    expect(
      listed.records.map((r: { kid: string; revokeTime?: string }) => [r.kid, r.revokeTime !== undefined]),
    ).toEqual([
      ["k1", true],
      ["k2", false],
    ]);
    await writeFile(file, JSON.stringify({ keys: [jwk("k3", { d: "AAAA" })] }));
    const secret = await admin(dataDir, "provider-keys", "set", "default", "Provider=acme", file);
    expect(secret.code).toBe(1);
    expect(secret.stderr).toMatch(/^VALIDATION_FAILED: .*keys\[0\]\.d is refused: a private key member/);

    const set2 = await admin(dataDir, "tenant", "set", "default", "--signatures", "REQUIRED");
    expect(set2.code, set2.stderr).toBe(0);
    expect(JSON.parse(set2.stdout).settings).toEqual({ signatures: "REQUIRED", discovery: "TOKEN" });
    expect(JSON.parse((await admin(dataDir, "tenant", "get", "default")).stdout).settings).toEqual({
      signatures: "REQUIRED",
      discovery: "TOKEN",
    });
    const open = await admin(dataDir, "tenant", "set", "default", "--discovery", "PUBLIC");
    expect(open.code, open.stderr).toBe(0);
    expect(JSON.parse(open.stdout).settings).toEqual({ signatures: "REQUIRED", discovery: "PUBLIC" });
    const wrong = await admin(dataDir, "tenant", "set", "default", "--signatures", "SOMETIMES");
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^VALIDATION_FAILED: .*OPTIONAL, REQUIRED_FOR_KEYED_PROVIDERS, REQUIRED/);
    expect((await admin(dataDir, "tenant", "get", "nowhere")).stderr).toMatch(/^TENANT_NOT_FOUND: /);
  });

  it("prints its usage for anything else, with exit code 2", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "asor-admin-"));
    dirs.push(dataDir);
    const res = await admin(dataDir, "tenant", "delete", "acme");
    expect(res.code).toBe(2);
    expect(res.stderr).toContain("npm run admin -- tenant create");
  });
});
