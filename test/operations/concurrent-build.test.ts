/**
 * Several `npm start` at once in one checkout whose dist/ is missing or stale
 * (scripts/start.mjs -> scripts/build.mjs buildIfStale): one of them builds,
 * the others wait for it and run what it built, and none finds dist/ half
 * replaced (issue 21: one failed with ERR_MODULE_NOT_FOUND while another
 * rewrote dist/).
 *
 * The scripts under test run in a small project of their own in a temporary
 * folder (the checkout's dist/ is left alone, and tsc takes a second): its
 * entry imports twenty modules one after another, as a service's start does,
 * so a dist/ replaced under it is noticed.
 */
import { spawn } from "node:child_process";
import { cp, mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";

const PROCESSES = 4;
const PARTS = 20;
const checkout = resolve(import.meta.dirname, "../..");
let project: string;

beforeAll(async () => {
  project = await mkdtemp(join(tmpdir(), "asor-build-"));
  await mkdir(join(project, "scripts"));
  for (const script of ["build.mjs", "start.mjs", "build-ui.mjs"])
    await cp(join(checkout, "scripts", script), join(project, "scripts", script));
  // The catalog's sources, as small as Vite builds: the build makes dist/ui/ of them.
  await mkdir(join(project, "ui"));
  await writeFile(join(project, "ui", "index.html"), "<!doctype html><title>catalog</title>\n");
  await symlink(join(checkout, "node_modules"), join(project, "node_modules"));
  await cp(join(checkout, "tsconfig.build.json"), join(project, "tsconfig.build.json"));
  const compilerOptions = {
    target: "ES2022",
    module: "NodeNext",
    moduleResolution: "NodeNext",
    strict: true,
    skipLibCheck: true,
    types: [],
  };
  await writeFile(join(project, "tsconfig.json"), JSON.stringify({ compilerOptions }));
  await writeFile(join(project, "package.json"), JSON.stringify({ type: "module", main: "dist/src/main.js" }));
  await mkdir(join(project, "src"));
  await mkdir(join(project, "gen"));
  await writeFile(join(project, "gen", "generated.ts"), "export const generated = 1;\n");
  for (let i = 0; i < PARTS; i++)
    await writeFile(join(project, "src", `part${i}.ts`), `export const value: number = ${i};\n`);
  await writeFile(
    join(project, "src", "main.ts"),
    `let sum = 0;
for (let i = 0; i < ${PARTS}; i++) {
  await new Promise((resolve) => setTimeout(resolve, 20));
  sum += ((await import(\`./part\${i}.js\`)) as { value: number }).value;
}
console.log(\`sum \${sum}\`);
`,
  );
});

afterAll(async () => {
  await rm(project, { recursive: true, force: true });
});

function start(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ["scripts/start.mjs", "dist/src/main.js"], { cwd: project });
  const out = { stdout: "", stderr: "" };
  child.stdout.on("data", (chunk: Buffer) => (out.stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (out.stderr += chunk.toString()));
  return new Promise((done) => child.once("exit", (code) => done({ code, ...out })));
}

const expectedSum = (PARTS * (PARTS - 1)) / 2;

it(`${PROCESSES} starts at once without dist/: one builds, all run what it built`, async () => {
  const runs = await Promise.all(Array.from({ length: PROCESSES }, start));
  expect(runs.map((run) => (run.code === 0 ? run.stdout.trim() : run.stderr))).toEqual(
    runs.map(() => `sum ${expectedSum}`),
  );
  const builds = runs.flatMap((run) => run.stderr.split("\n").filter((line) => line.startsWith("build: tsc")));
  expect(builds).toHaveLength(1);
}, 120_000);

it(`${PROCESSES} starts at once with a stale dist/: one builds, all run what it built`, async () => {
  await writeFile(join(project, "src", "part0.ts"), "export const value: number = 100;\n");
  const runs = await Promise.all(Array.from({ length: PROCESSES }, start));
  expect(runs.map((run) => (run.code === 0 ? run.stdout.trim() : run.stderr))).toEqual(
    runs.map(() => `sum ${expectedSum + 100}`),
  );
  const builds = runs.flatMap((run) => run.stderr.split("\n").filter((line) => line.startsWith("build: tsc")));
  expect(builds).toHaveLength(1);
}, 120_000);
