import { spawn } from "node:child_process";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/**
 * Builds dist/ (and with it the catalog, dist/ui/) when it is missing or older than its sources, as `npm start`
 * does: the servers under test run from the sources but serve the catalog from dist/ui/.
 */
export function buildCatalog(): Promise<void> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ["scripts/build.mjs", "--if-stale"], { cwd: ROOT, stdio: "inherit" });
    child.once("error", fail);
    child.once("exit", (code) => (code === 0 ? done() : fail(new Error(`npm run build exited with ${code}`))));
  });
}
