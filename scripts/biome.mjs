#!/usr/bin/env node
// Runs the Biome CLI (formatter and linter) from node_modules:
// `npm run -s biome -- <args>`, e.g. `npm run -s biome -- check --write .`.
//
// As with buf (scripts/buf.mjs), the project depends on Biome's Linux platform
// packages directly instead of @biomejs/biome: the registry these machines
// reach serves no macOS, Windows, musl or Android build, and `npm ci` refuses
// a lockfile that cannot record @biomejs/biome's optional dependencies on
// them. Elsewhere a `biome` on PATH (of the version in package.json) is used.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { constants } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The path of the biome binary for this machine, else `biome` (on PATH). */
export function biomePath() {
  try {
    return join(
      dirname(createRequire(import.meta.url).resolve(`@biomejs/cli-${process.platform}-${process.arch}/package.json`)),
      "biome",
    );
  } catch {
    return "biome";
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const result = spawnSync(biomePath(), process.argv.slice(2), { stdio: "inherit" });
  if (result.error) {
    const version = createRequire(import.meta.url)("../package.json").optionalDependencies["@biomejs/cli-linux-x64"];
    console.error(
      result.error.code === "ENOENT"
        ? "biome is not installed: `npm ci` installs it on Linux x64 and arm64 (glibc); " +
            `elsewhere install Biome ${version} and put it on PATH.`
        : result.error,
    );
    process.exit(1);
  }
  process.exit(result.status ?? 128 + (constants.signals[result.signal] ?? 0));
}
