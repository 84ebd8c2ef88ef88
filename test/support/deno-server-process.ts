import { readFileSync } from "node:fs";

/**
 * The `start:deno` script's command line, from package.json, split into words:
 * the tests run what the script runs (spawnServer's "deno" runtime), without
 * npm and sh in between (sh does not pass npm's SIGTERM on, so a stop through
 * `npm run` would orphan the server). Its launcher, scripts/deno.mjs, passes
 * SIGTERM and SIGINT on to Deno and exits with Deno's exit code.
 */
export function startDenoCommand(): string[] {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
    scripts: Record<string, string>;
  };
  const script = pkg.scripts["start:deno"];
  if (script === undefined) throw new Error("package.json has no start:deno script");
  return script.split(/\s+/);
}
