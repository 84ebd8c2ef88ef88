#!/usr/bin/env node
// `npm run build`: compiles src/ and gen/ to JavaScript in dist/ with tsc
// (tsconfig.build.json: dist/src and dist/gen mirror the tree, gen/openapi.json
// included), so that production runs plain node and no TypeScript loader.
//
//   node scripts/build.mjs             build; a type error fails it and leaves dist/ as it was
//   node scripts/build.mjs --if-stale  build only when dist/ is missing or older than its inputs
//
// tsc compiles into a fresh directory beside dist/, which replaces dist/ only
// when tsc succeeded (so no half-built dist/, and nothing left over from a
// deleted source file), with a stamp (dist/.build-stamp) of when the build
// started. dist/ is fresh while no file or directory under src/ or gen/, and
// neither tsconfig, changed after that: deciding takes a few milliseconds of
// stat calls and spawns nothing, so `npm start` stays fast.
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const CONFIG = "tsconfig.build.json";
/** What the build reads: a change to any of these (or below them) makes dist/ stale. */
const INPUTS = ["src", "gen", "tsconfig.json", CONFIG];
const STAMP = ".build-stamp";

/** The build's output directory (tsconfig.build.json's outDir), absolute. */
export function outDir() {
  return resolve(ROOT, JSON.parse(readFileSync(join(ROOT, CONFIG), "utf8")).compilerOptions.outDir);
}

/**
 * The newest modification time (ms) of the inputs: files and directories (a deleted or renamed file changes
 * its directory).
 */
function newestInput() {
  let newest = 0;
  const visit = (path) => {
    let stat;
    try {
      stat = statSync(path);
    } catch {
      return; // an input that is not there (e.g. an image with dist/ but no src/) cannot be newer
    }
    newest = Math.max(newest, stat.mtimeMs);
    if (stat.isDirectory()) for (const name of readdirSync(path)) visit(join(path, name));
  };
  for (const input of INPUTS) visit(join(ROOT, input));
  return newest;
}

/** Whether dist/ holds a successful build of the inputs as they are now. */
export function isFresh() {
  let started;
  try {
    started = JSON.parse(readFileSync(join(outDir(), STAMP), "utf8")).started;
  } catch {
    return false;
  }
  return typeof started === "number" && newestInput() < started;
}

/** Compiles the inputs into dist/; throws when tsc fails (dist/ is then left as it was). */
export function build() {
  const started = Date.now();
  const out = outDir();
  const next = join(ROOT, `.dist-${process.pid}`);
  let tsc;
  try {
    tsc = join(dirname(createRequire(import.meta.url).resolve("typescript/package.json")), "bin", "tsc");
  } catch {
    throw new Error(
      "building dist/ needs TypeScript, a devDependency: install without --omit=dev, " +
        "or build (npm run build) where it is installed and ship dist/ with the app.",
    );
  }
  console.error(`build: tsc -p ${CONFIG} (src/ and gen/ into ${out.slice(ROOT.length + 1)}/)`);
  rmSync(next, { recursive: true, force: true });
  // tsc reports on stdout: send it to stderr, where `npm run -s token`, whose stdout is the token, has its messages.
  const result = spawnSync(process.execPath, [tsc, "-p", join(ROOT, CONFIG), "--outDir", next], {
    cwd: ROOT,
    stdio: ["ignore", 2, 2],
  });
  if (result.status !== 0) {
    rmSync(next, { recursive: true, force: true });
    throw new Error(
      `build: tsc failed (${result.error?.message ?? `exit ${result.status ?? result.signal}`}); ` +
        `${out.slice(ROOT.length + 1)}/ is unchanged`,
    );
  }
  writeFileSync(join(next, STAMP), `${JSON.stringify({ started })}\n`);
  try {
    rmSync(out, { recursive: true, force: true });
    renameSync(next, out);
  } catch (error) {
    // Another build swapped its dist/ in at the same moment: keep that one if it is current.
    rmSync(next, { recursive: true, force: true });
    if (!isFresh()) throw error;
  }
  console.error(`build: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** Builds unless dist/ is fresh. */
export function buildIfStale() {
  if (!isFresh()) build();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args.some((a) => a !== "--if-stale")) {
    console.error(`usage: node scripts/build.mjs [--if-stale], not: ${args.join(" ")}`);
    process.exit(2);
  }
  try {
    if (args.includes("--if-stale")) buildIfStale();
    else build();
  } catch (error) {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  }
}
