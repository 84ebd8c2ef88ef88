/**
 * `asor validate`, offline, as a child process of the built program: examples/ valid, broken files refused with
 * file, path and code (the service's own codes), exit codes 0, 1 and 2; and exit 3 for a registry that cannot
 * be reached.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asor, asorJson, tempDir } from "../support/cli.js";
import { minimalDefinition } from "../support/definitions.js";

describe("asor validate", () => {
  let dir = "";
  let remove = async () => {};
  beforeAll(async () => {
    ({ dir, remove } = await tempDir());
  });
  afterAll(() => remove());

  it("passes examples/: every file valid, exit 0", async () => {
    const run = await asorJson(["validate", "examples/"]);
    expect(run.code).toBe(0);
    expect(run.json).toMatchObject({ ok: true, problems: [] });
    expect(run.json.definitions).toBeGreaterThanOrEqual(5);
  });

  it("prints each problem with its file, path and code, and exits 1", async () => {
    const broken = {
      ...minimalDefinition(),
      name: "Trailing space ",
      url: "not a url",
      hostConfig: [{ skillId: "nope", executionMode: { id: "Mode=Ambient" } }],
    };
    await writeFile(join(dir, "broken.json"), JSON.stringify(broken));
    await writeFile(join(dir, "good.json"), JSON.stringify(minimalDefinition()));
    const run = await asor(["validate", dir]);
    expect(run.code).toBe(1);
    const file = join(dir, "broken.json");
    expect(run.stdout).toContain(`${file}: name: INVALID_CHARACTER`);
    expect(run.stdout).toContain(`${file}: url: INVALID_URI`);
    expect(run.stdout).toContain(`${file}: hostConfig[0].skillId: UNKNOWN_SKILL`);
    expect(run.stdout).not.toContain("good.json");
  });

  it("checks a list file item by item, and its JSON as a POST's body is checked", async () => {
    const list = join(dir, "list", "two.json");
    await mkdir(join(dir, "list"));
    await writeFile(list, JSON.stringify([minimalDefinition(), { ...minimalDefinition(), platfrom: {} }]));
    const run = await asorJson(["validate", list]);
    expect(run.code).toBe(1);
    expect(run.json.problems).toEqual([
      expect.objectContaining({ file: list, path: "[1].platfrom", code: "UNKNOWN_FIELD" }),
    ]);
    await writeFile(list, '{"name": "a", "name": "b"}');
    const duplicate = await asorJson(["validate", list]);
    expect(duplicate.json.problems).toEqual([expect.objectContaining({ path: "name", code: "DUPLICATE_KEY" })]);
  });

  it("refuses two definitions of one name, provider and version, which apply could not tell apart", async () => {
    const twice = join(dir, "twice.json");
    await writeFile(twice, JSON.stringify([minimalDefinition(), minimalDefinition()]));
    const run = await asorJson(["validate", twice]);
    expect(run.code).toBe(1);
    expect(run.json.problems).toEqual([expect.objectContaining({ path: "[1]", code: "DUPLICATE_DEFINITION" })]);
  });

  it("says YAML is not read yet (exit 1), rather than skipping the file", async () => {
    const yaml = join(dir, "yaml", "agent.yaml");
    await mkdir(join(dir, "yaml"));
    await writeFile(yaml, "name: x\n");
    const run = await asor(["validate", join(dir, "yaml")]);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(`${yaml}: UNSUPPORTED_FORMAT`);
  });

  it("exits 2 on a wrong command line, with no stack trace", async () => {
    for (const args of [
      ["frobnicate"],
      ["validate"],
      ["validate", "--nope", "examples"],
      ["validate", "no/such/dir"],
    ]) {
      const run = await asor(args);
      expect(run.code, args.join(" ")).toBe(2);
      expect(run.stderr).toMatch(/^asor: /);
      expect(run.stderr).not.toContain("    at ");
    }
    const help = await asor(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("usage: asor <command>");
  });

  it("exits 3 when the registry cannot be reached, naming it", async () => {
    const run = await asor(["apply", "-f", "examples"], { ASOR_URL: "http://127.0.0.1:9", ASOR_TOKEN: "t" });
    expect(run.code).toBe(3);
    expect(run.stderr).toContain("http://127.0.0.1:9");
    expect(run.stderr).toContain("could not be reached");
  });
});
