#!/usr/bin/env node
// Runs the buf CLI from node_modules: `npm run -s buf -- <args>`.
//
// The project depends on buf's Linux platform packages directly instead of
// @bufbuild/buf: the registry these machines reach does not serve buf's macOS,
// Windows and armv7 packages, and `npm ci` refuses a lockfile that cannot
// record @bufbuild/buf's optional dependencies on them.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ARCH = { x64: "x64", arm64: "aarch64" };

/** The path of the buf binary for this machine. */
export function bufPath() {
  const pkg = `@bufbuild/buf-${process.platform}-${ARCH[process.arch] ?? process.arch}`;
  try {
    return join(dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`)), "bin", "buf");
  } catch {
    throw new Error(
      `buf is not installed for ${process.platform}-${process.arch}: ` +
        `the project installs ${pkg} only on linux x64 and arm64.`,
    );
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const result = spawnSync(bufPath(), process.argv.slice(2), { stdio: "inherit" });
  process.exit(result.status ?? 1);
}
