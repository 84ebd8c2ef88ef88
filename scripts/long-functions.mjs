/**
 * Lists the functions of src/ longer than a limit (80 lines by default), longest first: every
 * function declaration, method, accessor, constructor, function expression and arrow function with
 * a body, counted from its first line (after its comments) to its last. A function inside another
 * is listed on its own and counted in its parent too.
 *
 *   node scripts/long-functions.mjs [--max 80] [file or folder...]
 *
 * Uses TypeScript's own parser (the `typescript` package's API, which runs tsc's native binary).
 * test/architecture.test.ts imports longFunctions to hold the limit.
 */
import { readdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { SyntaxKind } from "typescript/unstable/ast";
import { computeLineStarts, skipTrivia } from "typescript/unstable/ast/scanner";
import { API } from "typescript/unstable/sync";

/** The TypeScript sources (not declarations) at `path` (relative to `cwd`), each relative to `cwd`, sorted. */
function sourcesUnder(cwd, path) {
  if (!statSync(resolve(cwd, path)).isDirectory()) return path.endsWith(".ts") && !path.endsWith(".d.ts") ? [path] : [];
  return readdirSync(resolve(cwd, path))
    .sort()
    .flatMap((name) => sourcesUnder(cwd, join(path, name)));
}

const functionKinds = new Set([
  SyntaxKind.FunctionDeclaration,
  SyntaxKind.FunctionExpression,
  SyntaxKind.ArrowFunction,
  SyntaxKind.MethodDeclaration,
  SyntaxKind.Constructor,
  SyntaxKind.GetAccessor,
  SyntaxKind.SetAccessor,
]);

/** The line (0-based) of a position, by binary search of the line starts. */
function lineOf(starts, pos) {
  let low = 0;
  let high = starts.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if (starts[mid] <= pos) low = mid;
    else high = mid - 1;
  }
  return low;
}

function nameOf(node, text) {
  const named = node.name ?? node.parent?.name;
  if (named) return text.slice(skipTrivia(text, named.pos), named.end);
  return "(anonymous)";
}

/**
 * The functions longer than `max` lines in the files and folders `roots` (relative to `cwd`, the folder of
 * tsconfig.json), longest first.
 */
export function longFunctions({ max = 80, roots = ["src"], cwd = process.cwd() } = {}) {
  const api = new API({ cwd });
  try {
    const snapshot = api.updateSnapshot({ openProject: "tsconfig.json" });
    const program = snapshot.getProjects()[0].program;
    const found = [];
    for (const path of roots.flatMap((root) => sourcesUnder(cwd, root))) {
      const source = program.getSourceFile(resolve(cwd, path));
      if (source === undefined) throw new Error(`${path} is not part of tsconfig.json's program`);
      const text = source.text;
      const starts = computeLineStarts(text);
      const visit = (node) => {
        if (functionKinds.has(node.kind) && node.body) {
          const first = lineOf(starts, skipTrivia(text, node.pos));
          const lines = lineOf(starts, node.end) - first + 1;
          if (lines > max) found.push({ path, line: first + 1, name: nameOf(node, text), lines });
        }
        node.forEachChild(visit);
      };
      source.forEachChild(visit);
    }
    return found.sort((a, b) => b.lines - a.lines);
  } finally {
    api.close();
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const maxAt = args.indexOf("--max");
  const max = maxAt === -1 ? 80 : Number(args.splice(maxAt, 2)[1]);
  const found = longFunctions({ max, roots: args.length > 0 ? args : ["src"] });
  for (const f of found) console.log(`${String(f.lines).padStart(4)}  ${f.path}:${f.line}  ${f.name}`);
  if (found.length === 0) console.log(`no function over ${max} lines`);
}
