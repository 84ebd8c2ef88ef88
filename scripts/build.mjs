#!/usr/bin/env node
// `npm run build`: compiles src/ and gen/ to JavaScript in dist/ with tsc
// (tsconfig.build.json: dist/src and dist/gen mirror the tree, gen/openapi.json
// included), so that production runs plain node and no TypeScript loader, and
// builds the catalog (ui/) into dist/ui with Vite (scripts/build-ui.mjs).
//
//   node scripts/build.mjs             build; a type error fails it and leaves dist/ as it was
//   node scripts/build.mjs --if-stale  build only when dist/ is missing or older than its inputs
//
// tsc compiles into a fresh directory beside dist/, which replaces dist/ only
// when tsc succeeded (so no half-built dist/, and nothing left over from a
// deleted source file), with a stamp (dist/.build-stamp) of when the build
// started. dist/ is fresh while no file or directory under src/, gen/ or ui/,
// and neither tsconfig, changed after that: deciding takes a few milliseconds of
// stat calls and spawns nothing, so `npm start` stays fast.
//
// One build at a time per checkout: a build holds .build.lock (created with
// O_EXCL, holding its pid), and several `npm start` at once that find dist/
// stale wait for the one that builds, then find dist/ fresh and run it,
// instead of each replacing dist/ under the others' imports (issue 21: one
// of three failed with ERR_MODULE_NOT_FOUND). A lock whose process is gone is
// taken over. A dist/ that is fresh is never replaced, so a process that
// found it fresh runs it undisturbed.
import { spawnSync } from "node:child_process";
import {
  closeSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const CONFIG = "tsconfig.build.json";
/** What the build reads: a change to any of these (or below them) makes dist/ stale. */
const INPUTS = ["src", "gen", "ui", "tsconfig.json", CONFIG, "scripts/build-ui.mjs"];
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

/** The lock of the builds of this checkout. */
const LOCK = join(ROOT, ".build.lock");
/** How long a start waits for another's build: far longer than tsc takes. */
const lockWaitMs = 10 * 60_000;

function sleepSync(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Whether process `pid` is alive (on this host: the lock is in the checkout). */
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === "EPERM";
  }
}

function modified(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return Date.now();
  }
}

/** Runs `body` holding the build lock, waiting for another build to end first. */
function withBuildLock(body) {
  const deadline = Date.now() + lockWaitMs;
  let said = false;
  for (;;) {
    try {
      const fd = openSync(LOCK, "wx");
      writeFileSync(fd, `${process.pid}\n`);
      closeSync(fd);
      break;
    } catch (error) {
      if (error.code !== "EEXIST") throw error;
    }
    let holder = Number.NaN;
    try {
      holder = Number.parseInt(readFileSync(LOCK, "utf8"), 10);
    } catch {
      continue; // released meanwhile
    }
    // A lock with no pid is being written (or its writer died at once: taken over after 10 s); a lock whose
    // process is gone is taken over.
    if (Number.isInteger(holder) ? !alive(holder) : Date.now() - modified(LOCK) > 10_000) {
      rmSync(LOCK, { force: true });
      continue;
    }
    if (Date.now() >= deadline) throw new Error(`build: ${LOCK} has been held by process ${holder} for too long`);
    if (!said) console.error(`build: waiting for the build of process ${holder}`);
    said = true;
    sleepSync(100);
  }
  try {
    return body();
  } finally {
    try {
      unlinkSync(LOCK);
    } catch {}
  }
}

/** Compiles the inputs into dist/; throws when tsc fails (dist/ is then left as it was). */
export function build() {
  withBuildLock(compile);
}

function compile() {
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
  console.error("build: vite (ui/ into dist/ui/)");
  const ui = spawnSync(process.execPath, [join(ROOT, "scripts", "build-ui.mjs"), join(next, "ui")], {
    cwd: ROOT,
    stdio: ["ignore", 2, 2],
  });
  if (ui.status !== 0) {
    rmSync(next, { recursive: true, force: true });
    throw new Error(
      `build: the catalog's build failed (${ui.error?.message ?? `exit ${ui.status ?? ui.signal}`}); ` +
        `${out.slice(ROOT.length + 1)}/ is unchanged`,
    );
  }
  writeFileSync(join(next, STAMP), `${JSON.stringify({ started })}\n`);
  // Out of the way, then in: dist/ is missing for two renames, not for a whole removal.
  const old = join(ROOT, `.dist-${process.pid}-old`);
  rmSync(old, { recursive: true, force: true });
  try {
    renameSync(out, old);
  } catch (error) {
    if (error.code !== "ENOENT") throw error;
  }
  renameSync(next, out);
  rmSync(old, { recursive: true, force: true });
  console.error(`build: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/** Builds unless dist/ is fresh; when another process is building, waits for it and builds only if still stale. */
export function buildIfStale() {
  if (isFresh()) return;
  withBuildLock(() => {
    if (!isFresh()) compile();
  });
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
