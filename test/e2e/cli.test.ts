/**
 * `asor` end to end, the built program as a child process against a real registry on loopback, on each
 * database: apply of examples/ (all created), again (all unchanged, nothing written), a changed file (one
 * updated, its fields named), --dry-run (nothing written), --prune (within the files' providers only), export
 * then apply (all unchanged), get and list, and --tenant.
 */
import { cp, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asor, asorJson, tempDir } from "../support/cli.js";
import { forEachDatabase } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { useServer } from "../support/server.js";

const EXAMPLES = 6;

forEachDatabase((db) => {
  describe("asor against a registry", () => {
    const server = useServer(db);
    let dir = "";
    let remove = async () => {};
    let env: Record<string, string> = {};
    beforeAll(async () => {
      ({ dir, remove } = await tempDir());
      const token = await server().bearer({ tenant: "default", domains: ["Development", "Setup: Agents"] });
      env = { ASOR_URL: server().baseUrl, ASOR_TOKEN: token.replace(/^Bearer /, "") };
    });
    afterAll(() => remove());

    /** The revision of the tenant: a write moves it. */
    const revision = async () => {
      const answer = await fetch(`${server().baseUrl}/asor/v1/agentDefinition?limit=1`, {
        headers: { authorization: server().authorization },
      });
      return answer.headers.get("x-registry-revision");
    };
    const actions = (steps: { action: string }[] | undefined) => steps?.map((s) => s.action);

    it("applies examples/: all created; a second apply finds all unchanged and writes nothing", async () => {
      // A definition of a provider the files do not name, which --prune must leave alone later.
      const other = await fetch(`${server().baseUrl}/asor/v1/agentDefinition`, {
        method: "POST",
        headers: { authorization: server().authorization, "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition({ provider: { id: "Provider=Elsewhere" } })),
      });
      expect(other.status).toBe(201);
      const first = await asorJson(["apply", "-f", "examples"], env);
      expect(first.code).toBe(0);
      expect(actions(first.json.steps)).toEqual(Array(EXAMPLES).fill("created"));
      const before = await revision();
      const second = await asorJson(["apply", "-f", "examples"], env);
      expect(second.code).toBe(0);
      expect(actions(second.json.steps)).toEqual(Array(EXAMPLES).fill("unchanged"));
      expect(await revision()).toBe(before);
      const diff = await asor(["diff", "-f", "examples"], env);
      expect(diff.code).toBe(0);
    });

    it("updates the one changed file, naming its fields; diff and --dry-run show it, writing nothing", async () => {
      await cp("examples", join(dir, "changed"), { recursive: true });
      const file = join(dir, "changed", "expense-report-agent.json");
      const def = JSON.parse(await readFile(file, "utf8"));
      def.overview = "Snap a receipt; I do the rest.";
      def.skills[0].tags.push({ tag: "mobile" });
      await writeFile(file, JSON.stringify(def, null, 2));
      const before = await revision();
      const diff = await asor(["diff", "-f", join(dir, "changed")], env);
      expect(diff.code).toBe(1);
      expect(diff.stdout).toContain(
        "would update Expense Report Assistant 3.2.0 (Provider=Ledgerly): skills, overview",
      );
      const dry = await asorJson(["apply", "-f", join(dir, "changed"), "--dry-run"], env);
      expect(dry.code).toBe(0);
      expect(dry.json.dryRun).toBe(true);
      expect(await revision()).toBe(before);
      const applied = await asor(["apply", "-f", join(dir, "changed")], env);
      expect(applied.code).toBe(0);
      const lines = applied.stdout.split("\n");
      expect(lines.filter((l) => l.startsWith("updated"))).toEqual([
        expect.stringMatching(/^updated +Expense Report Assistant 3\.2\.0 \(Provider=Ledgerly\): skills, overview {2}/),
      ]);
      expect(lines.filter((l) => l.startsWith("unchanged"))).toHaveLength(EXAMPLES - 1);
      const again = await asorJson(["apply", "-f", join(dir, "changed")], env);
      expect(actions(again.json.steps)).toEqual(Array(EXAMPLES).fill("unchanged"));
    });

    it("--prune deprecates the versions no file holds, only of the providers the files name", async () => {
      await rm(join(dir, "changed", "knowledge-search-agent.json"));
      const run = await asorJson(["apply", "-f", join(dir, "changed"), "--prune"], env);
      expect(run.code).toBe(0);
      const deprecated = run.json.steps?.filter((s) => s.action === "deprecated");
      expect(deprecated).toEqual([
        expect.objectContaining({ name: "Policy Knowledge Agent", provider: "Provider=Acme", version: "1.4.2" }),
      ]);
      const id = (deprecated?.[0] as { id?: string } | undefined)?.id;
      const got = await asorJson(["get", id ?? "missing"], env);
      expect(got.json.meta).toMatchObject({ status: "DEPRECATED" });
      const elsewhere = await asorJson(["list", "provider=Provider=Elsewhere"], env);
      expect(elsewhere.json.data).toEqual([
        expect.objectContaining({ meta: expect.objectContaining({ status: "ACTIVE" }) }),
      ]);
      const again = await asorJson(["apply", "-f", join(dir, "changed"), "--prune"], env);
      expect(actions(again.json.steps)).toEqual(Array(EXAMPLES - 1).fill("unchanged"));
    });

    it("exports one file per definition without read-only members; applying the export changes nothing", async () => {
      const out = join(dir, "exported");
      const exported = await asorJson(["export", "-o", out], env);
      expect(exported.code).toBe(0);
      const files = exported.json.files as string[];
      expect(files).toHaveLength(EXAMPLES + 1);
      expect(files).toContain(join(out, "Ledgerly_Expense-Report-Assistant_3.2.0.json"));
      const text = await readFile(join(out, "Ledgerly_Expense-Report-Assistant_3.2.0.json"), "utf8");
      for (const member of ['"meta"', '"reference_id"', '"descriptor": "Ledgerly"', '"id": "Provider=Ledgerly"'])
        expect(text.includes(member), member).toBe(member === '"id": "Provider=Ledgerly"');
      const again = await asorJson(["export", "-o", out], env);
      expect(again.json.files).toEqual(files);
      const applied = await asorJson(["apply", "-f", out], env);
      expect(applied.code).toBe(0);
      expect(actions(applied.json.steps)).toEqual(Array(EXAMPLES + 1).fill("unchanged"));
    });

    it("get and list read the token's tenant, or the one --tenant names", async () => {
      const list = await asor(["list", "tag=finance"], env);
      expect(list.code).toBe(0);
      expect(list.stdout).toContain("Expense Report Assistant 3.2.0 (Provider=Ledgerly)  ACTIVE");
      const named = await asorJson(["list", "--tenant", "default", "name=Expense Report Assistant"], env);
      expect(named.json.total).toBe(1);
      const agent = await asorJson(["get", "Agent_ID=AGENT-2"], env);
      expect(agent.code).toBe(0);
      expect(agent.json.reference_id).toBe("Agent_ID=AGENT-2");
      const missing = await asor(["get", "0123456789abcdef0123456789abcdef"], env);
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain("404");
      const otherTenant = await asor(["list", "--tenant", "acme"], env);
      expect(otherTenant.code).toBe(3);
      expect(otherTenant.stderr).toContain("403");
    });

    it("exits 3 with the registry's message when the token is refused", async () => {
      const run = await asor(["apply", "-f", "examples"], { ...env, ASOR_TOKEN: "not-a-token" });
      expect(run.code).toBe(3);
      expect(run.stderr).toContain("401");
      expect(run.stderr).not.toContain("    at ");
    });
  });
});
