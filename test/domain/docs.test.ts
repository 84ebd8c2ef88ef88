import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";
import { allCodes, ERRORS } from "../../src/domain/errors.js";

describe("docs/errors.md", () => {
  const readme = readFileSync("docs/errors.md", "utf8");
  const codesTable = readme.slice(
    readme.indexOf("Codes (`code`):"),
    readme.indexOf("\n## ", readme.indexOf("Codes (`code`):")),
  );
  const documented = new Set([...codesTable.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1]));

  it("documents every error code the service answers with, and no other", () => {
    expect([...documented].sort()).toEqual(Object.keys(allCodes()).sort());
  });

  it("gives each status the gRPC code the error table gives it, and no other pair", () => {
    const statusTable = readme.slice(
      readme.indexOf("| status | gRPC code | when |"),
      readme.indexOf("Codes (`code`):"),
    );
    const documented = new Set(
      [...statusTable.matchAll(/^\| (\d{3}) \| ([A-Z_]+) \|/gm)].map((m) => `${m[1]} ${m[2]}`),
    );
    const snake = (name: string) => name.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
    const table = new Set(Object.values(ERRORS).map((row) => `${row.http} ${snake(row.grpc)}`));
    expect([...documented].sort()).toEqual([...table].sort());
  });
});

/** The Markdown pages of the repository's documentation: docs/ and its folders (the benchmark log). */
const pages = [
  "README.md",
  "BENCHMARKS.md",
  ...readdirSync("docs", { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".md"))
    .map((f) => join("docs", f)),
];

/** The anchors GitHub makes of a page's headings. */
function anchorsOf(page: string): Set<string> {
  const headings = [...readFileSync(page, "utf8").matchAll(/^#{1,6} (.+)$/gm)].map((m) => m[1] ?? "");
  return new Set(
    headings.map((h) =>
      h
        .toLowerCase()
        .replace(/[^a-z0-9 _-]/g, "")
        .replace(/ /g, "-"),
    ),
  );
}

describe("the documentation's links", () => {
  it.each(pages)("%s links only to pages and headings of this repository that exist", (page) => {
    const text = readFileSync(page, "utf8");
    const links = [...text.matchAll(/\]\(([^)\s]+)\)/g)]
      .map((m) => m[1] ?? "")
      .filter((href) => !/^[a-z]+:/.test(href));
    for (const href of links) {
      const [path = "", anchor] = href.split("#");
      const target = path === "" ? page : normalize(join(dirname(page), path));
      expect(target.startsWith(".."), `${page}: ${href} leaves the repository`).toBe(false);
      expect(existsSync(target), `${page}: ${href} names no file`).toBe(true);
      if (anchor !== undefined && target.endsWith(".md"))
        expect(anchorsOf(target).has(anchor), `${page}: ${href} names no heading`).toBe(true);
    }
    // Nothing leans on files a clone does not have.
    expect(text).not.toMatch(/\.\.\/shared|SPEC\.md|DESIGN\.md/);
  });
});

describe("the pages a reader opens first", () => {
  // The current figures and the short decisions stay short; the dated runs and the narratives have
  // pages of their own (docs/benchmarks/log.md, docs/decisions/).
  it.each([
    ["BENCHMARKS.md", 300],
    ["docs/decisions.md", 500],
  ])("%s stays under %i lines", (page, limit) => {
    const lines = readFileSync(page, "utf8").split("\n").length;
    expect(lines, `${page}: ${lines} lines`).toBeLessThan(limit);
  });

  it("BENCHMARKS.md opens with the current figures, each with a command", () => {
    const text = readFileSync("BENCHMARKS.md", "utf8");
    const headings = [...text.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
    expect(headings[0]).toBe("Current figures");
    expect(headings).toEqual(expect.arrayContaining(["Machine", "Method"]));
    const table = text.slice(text.indexOf("| scenario |"), text.indexOf("\n\n", text.indexOf("| scenario |")));
    const rows = table.split("\n").slice(2);
    expect(rows.length).toBeGreaterThan(10);
    for (const row of rows) expect(row, row).toMatch(/\| (`[^`]+`|same( \(.*\))?|`\.\.\. .*`) \|$/);
  });
});

/** Every file under `root` (a file or a folder), folders named with a leading dot left out. */
function filesUnder(root: string): string[] {
  if (!statSync(root).isDirectory()) return [root];
  return readdirSync(root, { withFileTypes: true })
    .filter((entry) => !entry.name.startsWith("."))
    .flatMap((entry) => filesUnder(join(root, entry.name)));
}

describe("the repository", () => {
  // Spelled in pieces so that this file does not cite them itself.
  const outside = new RegExp(["\\.\\./shared", "SPEC\\.md", "DESIGN\\.md"].join("|"));
  const roots = ["README.md", "BENCHMARKS.md", "docs", "src", "test", "proto", "gen", "scripts", "bench"];

  it("cites no file a clone does not have: not in the code, the proto, nor what is generated and served", () => {
    const files = roots.flatMap(filesUnder);
    expect(files).toContain("gen/openapi.json");
    expect(files).toContain("proto/asor/v1/agent_definition_service.proto");
    const citing = files.filter((file) => outside.test(readFileSync(file, "latin1")));
    expect(citing).toEqual([]);
  });
});
