/**
 * The layers of src/ point down (docs/architecture.md): the import
 * statements of the files as they are on disk have no cycle (but the
 * migrations' type-only one: each names its Migration type from index.ts,
 * which lists them), and the HTTP vocabulary, observability and transport
 * never reach up into the edge.
 */
import { describe, expect, it } from "vitest";
import { importsOf, sourcesUnder } from "./support/imports.js";

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
    ["src/observability/", ["src/domain/", "src/http/", "src/observability/", "src/logger.ts"]],
    [
      "src/transport/",
      ["src/domain/", "src/http/", "src/observability/", "src/operations/", "src/transport/", "src/logger.ts"],
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
