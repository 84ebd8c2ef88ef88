#!/usr/bin/env node
// Runs Deno from node_modules.
//
//   node scripts/deno.mjs serve     the service under Deno (`npm run start:deno`)
//   node scripts/deno.mjs <args>    any deno command, e.g. `check --sloppy-imports src/main/node.ts`
//
// The project depends on @deno/linux-x64-glibc (the binary) instead of the
// `deno` package: the registry these machines reach serves no other Deno
// build, and `npm ci` refuses a lockfile that cannot record `deno`'s optional
// dependencies on them. Elsewhere a `deno` on PATH is used.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { constants } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { buildIfStale } from "./build.mjs";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
/** What the service reads under Deno besides its data dir (denoServeArgs says why). */
const READABLE = ["src", "gen", "node_modules", "dist/ui", "package.json"];

/** The deno binary for this machine: the installed package's, else `deno` on PATH. */
export function denoPath() {
  try {
    return join(
      dirname(createRequire(import.meta.url).resolve(`@deno/${process.platform}-${process.arch}-glibc/package.json`)),
      "deno",
    );
  } catch {
    return "deno";
  }
}

/**
 * The V8 heap bounds `npm start` gives node (package.json's config.nodeFlags),
 * as one --v8-flags value: Deno does not read NODE_OPTIONS-style flags, and
 * without them its heap grows to what V8 picks for the machine (issue 19).
 */
export function v8Flags() {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  return pkg.config.nodeFlags.split(/\s+/).filter(Boolean).join(",");
}

/**
 * `deno run` of the service's one entrypoint (src/main/node.ts, what `npm start`
 * runs), from the TypeScript sources (Deno strips the types itself; no build),
 * with the narrowest permissions the service works with:
 * - --allow-net: listen on HOST:PORT, reach the database and the AUTH_ISSUER
 *   (all three are configuration, so no fixed host list);
 * - --allow-env: the config is the whole environment (process.env);
 * - --allow-read: the code (src/, gen/, node_modules/), the built catalog (dist/ui/, built first when stale, as
 *   `npm start` builds dist/), package.json (its version, in the prober's User-Agent) and the data dir;
 *   --allow-write: the data dir only (the embedded database, node:sqlite
 *   under Deno, and the local issuer's key);
 * - no --allow-ffi, --allow-run, --allow-sys: no native addon, no subprocess,
 *   no OS information.
 * --sloppy-imports resolves the source's `./x.js` imports to `./x.ts`, as
 * TypeScript and tsx do; --no-lock keeps Deno from writing a deno.lock (npm's
 * lockfile pins the packages); --node-modules-dir=manual uses the installed
 * node_modules and never downloads.
 *
 * DATA_DIR is read here, before the service parses its config, because
 * permissions are fixed when Deno starts; the default matches src/config.ts.
 */
export function denoServeArgs(env = process.env) {
  const dataDir = resolve(env.DATA_DIR || "./data");
  return [
    "run",
    "--no-prompt",
    "--no-lock",
    "--node-modules-dir=manual",
    "--sloppy-imports",
    `--v8-flags=${v8Flags()}`,
    "--allow-net",
    "--allow-env",
    `--allow-read=${READABLE.map((path) => join(ROOT, path)).join(",")},${dataDir}`,
    `--allow-write=${dataDir}`,
    join(ROOT, "src/main/node.ts"),
  ];
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [command, ...rest] = process.argv.slice(2);
  if (command === "serve" && rest.length > 0) {
    console.error(
      `serve takes no arguments (the service is configured by environment variables), not: ${rest.join(" ")}`,
    );
    process.exit(2);
  }
  if (command === "serve") {
    // The service runs from the sources, but serves the catalog from dist/ui/: built as `npm start` builds it.
    try {
      buildIfStale();
    } catch (error) {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    }
  }
  const child = spawn(denoPath(), command === "serve" ? denoServeArgs() : process.argv.slice(2), { stdio: "inherit" });
  // Pass stop signals on, so stopping this launcher stops the service gracefully.
  for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
  child.once("error", (error) => {
    console.error(
      error.code === "ENOENT"
        ? "deno is not installed: `npm ci` installs it on Linux x64 (glibc); " +
            "elsewhere install Deno 2.9 and put it on PATH."
        : error,
    );
    process.exit(1);
  });
  child.once("exit", (code, signal) => process.exit(code ?? 128 + (constants.signals[signal] ?? 0)));
}
