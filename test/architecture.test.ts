/**
 * The layers of src/ point down (docs/architecture.md): the import
 * statements of the files as they are on disk have no cycle (but the
 * migrations' type-only one: each names its Migration type from index.ts,
 * which lists them), and the HTTP vocabulary and observability never reach
 * up into the surfaces; each surface folder imports the pipeline and no other
 * surface (src/surfaces/README.md). And no line of code is wider than Biome's
 * lineWidth (120), strings and comments included, which Biome cannot wrap.
 */
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { longFunctions } from "../scripts/long-functions.mjs";
import { importsOf, sourcesUnder } from "./support/imports.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");

/** Each file of src/ and the files of src/ it imports (a relative import, `.js` read as `.ts`). */
async function importGraph(): Promise<Map<string, { target: string; typeOnly: boolean }[]>> {
  const files = await sourcesUnder("src");
  return new Map(
    files.map((file) => [file.path, importsOf(file.path, file.source).filter((i) => i.target.startsWith("src/"))]),
  );
}

/** The strongly connected components of more than one file (Tarjan's algorithm): the import cycles. */
function cycles(graph: Map<string, { target: string }[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (file: string): void => {
    index.set(file, next);
    low.set(file, next++);
    stack.push(file);
    onStack.add(file);
    for (const { target } of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) low.set(file, Math.min(low.get(file)!, index.get(target)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1) found.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return found;
}

describe("the layers of src/", () => {
  it("have no import cycle but the migrations' type-only one", async () => {
    const graph = await importGraph();
    expect(graph.size).toBeGreaterThan(50);
    const withoutMigrationTypes = new Map(
      [...graph].map(([file, imports]) => [
        file,
        imports.filter((i) => !(i.typeOnly && file.startsWith("src/storage/migrations/"))),
      ]),
    );
    expect(cycles(withoutMigrationTypes)).toEqual([]);
  });

  it("finds a cycle when there is one (the check can fail)", () => {
    const graph = new Map([
      ["src/a.ts", [{ target: "src/b.ts" }]],
      ["src/b.ts", [{ target: "src/c.ts" }]],
      ["src/c.ts", [{ target: "src/a.ts" }]],
      ["src/d.ts", [{ target: "src/a.ts" }]],
    ]);
    expect(cycles(graph)).toEqual([["src/a.ts", "src/b.ts", "src/c.ts"]]);
  });

  it.each([
    ["src/http/", ["src/domain/", "src/http/"]],
    ["src/catalog/", ["src/domain/", "src/http/", "src/catalog/"]],
    ["src/observability/", ["src/domain/", "src/http/", "src/observability/", "src/logger.ts"]],
    [
      "src/surfaces/",
      [
        "src/domain/",
        "src/http/",
        "src/observability/",
        "src/operations/",
        "src/surfaces/",
        "src/logger.ts",
        "src/auth/",
        "src/catalog/",
      ],
    ],
  ])("keeps %s below the edge: it imports only from %j", async (folder, allowed) => {
    const graph = await importGraph();
    const offending = [...graph]
      .filter(([file]) => file.startsWith(folder))
      .flatMap(([file, imports]) =>
        imports.filter((i) => !allowed.some((a) => i.target.startsWith(a))).map((i) => `${file} -> ${i.target}`),
      );
    expect(offending).toEqual([]);
  });
});

/** The surface folders of src/surfaces/ (src/surfaces/README.md): one per protocol, the router's, plain HTTP's. */
const SURFACES = ["grpc", "connect", "rest", "router", "endpoints", "mcp"].map((f) => `src/surfaces/${f}/`);
/** What every surface folder may import of src/surfaces/ besides its own files. */
const SHARED = ["src/surfaces/pipeline/", "src/surfaces/encoding/"];

/** `file -> target` of each import of a surface folder's file that reaches another surface or the edge. */
function surfaceCrossings(graph: Map<string, { target: string }[]>): string[] {
  return [...graph].flatMap(([file, imports]) => {
    const own = SURFACES.find((folder) => file.startsWith(folder));
    if (own === undefined && !SHARED.some((folder) => file.startsWith(folder))) return [];
    return imports
      .filter((i) => i.target.startsWith("src/surfaces/"))
      .filter((i) => !SHARED.some((folder) => i.target.startsWith(folder)) && !(own && i.target.startsWith(own)))
      .map((i) => `${file} -> ${i.target}`);
  });
}

/** Node's private objects, as the code names them: one pattern, so the rule and its test read the same names. */
const NODE_PRIVATE = /\b_httpMessage\b/g;

describe("the surfaces (src/surfaces/README.md)", () => {
  it("each surface folder imports the pipeline, and no other surface nor the edge", async () => {
    const graph = await importGraph();
    expect(surfaceCrossings(graph)).toEqual([]);
    for (const folder of SURFACES) {
      const imports = [...graph].filter(([file]) => file.startsWith(folder)).flatMap(([, i]) => i);
      expect(
        imports.some((i) => i.target.startsWith("src/surfaces/pipeline/")),
        folder,
      ).toBe(true);
    }
  });

  it("finds a surface that imports another (the check can fail)", () => {
    const graph = new Map([
      ["src/surfaces/grpc/unary.ts", [{ target: "src/surfaces/pipeline/pipeline.ts" }]],
      ["src/surfaces/connect/unary.ts", [{ target: "src/surfaces/grpc/request.ts" }]],
      ["src/surfaces/rest/door.ts", [{ target: "src/surfaces/edge.ts" }]],
      ["src/surfaces/pipeline/door.ts", [{ target: "src/surfaces/router/routes.ts" }]],
    ]);
    expect(surfaceCrossings(graph)).toEqual([
      "src/surfaces/connect/unary.ts -> src/surfaces/grpc/request.ts",
      "src/surfaces/rest/door.ts -> src/surfaces/edge.ts",
      "src/surfaces/pipeline/door.ts -> src/surfaces/router/routes.ts",
    ]);
  });

  it("only the router's folder reads the verdict key; nothing of the surfaces imports node: modules", async () => {
    const files = await sourcesUnder("src");
    const readers = files.filter((f) => /\bverdictKey\b/.test(f.source)).map((f) => f.path);
    expect(readers.length).toBeGreaterThan(0);
    expect(readers.filter((path) => !path.startsWith("src/surfaces/router/"))).toEqual([]);
    const nodeImports = files
      .filter((f) => f.path.startsWith("src/surfaces/"))
      .flatMap((f) =>
        importsOf(f.path, f.source)
          .filter((i) => i.target.startsWith("node:"))
          .map((i) => `${f.path} -> ${i.target}`),
      );
    expect(nodeImports).toEqual([]);
  });

  it("only the Node adapter touches Node's private objects, each use pinned by a test", async () => {
    const files = await sourcesUnder("src");
    const users = files.filter((f) => f.source.match(NODE_PRIVATE) !== null).map((f) => f.path);
    expect(users.length).toBeGreaterThan(0);
    expect(users.filter((path) => !path.startsWith("src/node/"))).toEqual([]);
    // Each file that reads one has its use held by test/node/private-objects.test.ts, which names the file.
    const pins = await readFile(join(root, "test/node/private-objects.test.ts"), "utf8");
    expect(users.filter((path) => !pins.includes(path))).toEqual([]);
  });
});

describe("the catalog's app (ui/)", () => {
  // The app is a browser bundle: what it takes from src/ is a type the server writes and the app reads (the body
  // of /ui/config.json), imported as a type only, from a file that imports nothing itself, so no server code can
  // reach the bundle or the app's browser-only type check. Nothing of src/ imports the app.
  it("imports from src/ by type only, files that import nothing; src/ imports nothing of ui/", async () => {
    const app = await sourcesUnder("ui/src");
    expect(app.length).toBeGreaterThan(5);
    const outside = app.flatMap((file) =>
      // A relative import's target is a path of the repository; a package's is its name.
      importsOf(file.path, file.source).filter((i) => !i.target.startsWith("ui/") && existsSync(join(root, i.target))),
    );
    expect(outside.map((i) => i.target)).toContain("src/catalog/sign-in-config.ts");
    expect(outside.filter((i) => !i.typeOnly || !i.target.startsWith("src/")).map((i) => i.statement)).toEqual([]);
    const shared = await sourcesUnder("src");
    for (const target of new Set(outside.map((i) => i.target))) {
      const file = shared.find((f) => f.path === target);
      expect(file, target).toBeDefined();
      expect(
        importsOf(target, file!.source).map((i) => i.statement),
        target,
      ).toEqual([]);
    }
    const server = shared.flatMap((file) =>
      importsOf(file.path, file.source).filter((i) => i.target.startsWith("ui/")),
    );
    expect(server.map((i) => i.statement)).toEqual([]);
  });
});

/** Biome's lineWidth (biome.json): the formatter wraps code to it, strings and comments are wrapped by hand. */
const lineWidth = 120;

/**
 * `path:line: length` of each line over `lineWidth` in the source files (TypeScript and JavaScript) under
 * `dirs`, but those under `skipped` (relative to the repository, each ending in `/`) and dot folders.
 */
async function longLines(dirs: readonly string[], skipped: readonly string[]): Promise<string[]> {
  const found: string[] = [];
  for (const dir of dirs) {
    const entries = await readdir(join(root, dir), { recursive: true, withFileTypes: true });
    const files = entries
      .filter((entry) => entry.isFile() && /\.[cm]?[jt]s$/.test(entry.name))
      .map((entry) => relative(root, join(entry.parentPath, entry.name)))
      .filter((path) => !skipped.some((s) => path.startsWith(s)) && !path.split("/").some((p) => p.startsWith(".")))
      .sort();
    for (const path of files) {
      const lines = (await readFile(join(root, path), "utf8")).split("\n");
      lines.forEach((line, i) => {
        if (line.length > lineWidth) found.push(`${path}:${i + 1}: ${line.length}`);
      });
    }
  }
  return found;
}

describe("the width of the code", () => {
  // The shipped migrations are frozen (src/storage/migrations/README.md), gen/ is generated.
  it("no line of src, ui, test, bench or scripts is over 120 characters (frozen migrations, gen/ aside)", async () => {
    expect(await longLines(["src", "ui", "test", "bench", "scripts"], ["src/storage/migrations/"])).toEqual([]);
  });
});

/** The most lines a source file of src/ may have (issue 42: files a reader can hold). */
const maxFileLines = 400;

/**
 * The files still over maxFileLines, each to be split and then taken off this list (the check fails for a file on
 * it that is no longer over, so the list only shrinks).
 */
const overLong = new Set<string>();

describe("the length of the code", () => {
  it(`no source file of src/ is over ${maxFileLines} lines (but those still to be split)`, async () => {
    const sources = await sourcesUnder("src");
    expect(sources.length).toBeGreaterThan(50);
    const lengths = new Map(sources.map((file) => [file.path, file.source.split("\n").length - 1]));
    const over = [...lengths].filter(([, lines]) => lines > maxFileLines).map(([path, lines]) => `${path}: ${lines}`);
    expect(over.filter((entry) => !overLong.has(entry.slice(0, entry.indexOf(":"))))).toEqual([]);
    // A file split since is taken off the list.
    expect([...overLong].filter((path) => (lengths.get(path) ?? 0) <= maxFileLines)).toEqual([]);
  });
});

/** The most lines a function of src/ may have (issue 42), counted as scripts/long-functions.mjs counts them. */
const maxFunctionLines = 80;

/**
 * The functions still over maxFunctionLines, as `path name`, each to be split and then taken off this list (the
 * check fails for one on it that is no longer over, so the list only shrinks). The migration is frozen.
 */
const overLongFunctions = new Set(["src/storage/migrations/0015-add-revisions.ts createMysql"]);

describe("the length of the functions", () => {
  it(`no function of src/ is over ${maxFunctionLines} lines (but those still to be split)`, () => {
    const over = longFunctions({ max: maxFunctionLines, cwd: root });
    const names = new Set(over.map((f) => `${f.path} ${f.name}`));
    expect(
      over.filter((f) => !overLongFunctions.has(`${f.path} ${f.name}`)).map((f) => `${f.path}:${f.line} ${f.name}`),
    ).toEqual([]);
    // A function split since is taken off the list.
    expect([...overLongFunctions].filter((name) => !names.has(name))).toEqual([]);
  });

  it("finds a function over the limit when there is one (the check can fail)", () => {
    const over = longFunctions({ max: 20, roots: ["src/auth/auth-config.ts"], cwd: root });
    expect(over.map((f) => f.name)).toContain("parseAuthConfig");
    expect(over.every((f) => f.path === "src/auth/auth-config.ts" && f.lines > 20)).toBe(true);
  });
});
