/**
 * The command lines of package.json's scripts that run the compiled service (`npm start`, `npm run admin`,
 * `npm run token`), for tests that start them as processes: the tests run what the scripts run, without npm and
 * sh in between (sh does not pass npm's SIGTERM on), as startDenoCommand does for `npm run start:deno`.
 *
 * The scripts run dist/ (scripts/start.mjs), built first when stale: builtDist() builds it once per test process
 * before the first such start, so a start's own time bound does not include a build (about 5 s, tsc and Vite).
 * A start from dist/ takes about 1 s where `node --import tsx src/main/node.ts` took 3 to 4 s (tsx's loader
 * resolves and transforms every module on a thread of its own).
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

let building: Promise<void> | undefined;

/** Builds dist/ when it is missing or older than its sources (`node scripts/build.mjs --if-stale`), once. */
export function builtDist(): Promise<void> {
  building ??= promisify(execFile)(process.execPath, ["scripts/build.mjs", "--if-stale"], { cwd: ROOT }).then(
    () => undefined,
    (error: unknown) => {
      building = undefined;
      throw error;
    },
  );
  return building;
}

/**
 * package.json's script `name` split into words, node as this process's node, `$npm_package_config_nodeFlags`
 * (npm start's V8 flags) as `nodeFlags`, and dist/ built: spawn it with the checkout as its working directory.
 */
export async function npmScriptCommand(
  name: "start" | "admin" | "token",
  nodeFlags: readonly string[] = [],
): Promise<[string, ...string[]]> {
  const pkg = JSON.parse(readFileSync(resolve(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
  const script = pkg.scripts[name];
  if (script === undefined) throw new Error(`package.json has no ${name} script`);
  const [node, ...args] = script
    .split(/\s+/)
    .flatMap((word) => (word === "$npm_package_config_nodeFlags" ? [...nodeFlags] : [word]));
  if (node !== "node") throw new Error(`package.json's ${name} script does not start with node: ${script}`);
  await builtDist();
  return [process.execPath, ...args];
}
