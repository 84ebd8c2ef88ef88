/**
 * The prober's User-Agent (issue 44, item 1): `agent-definition-registry/<version> (+liveness probe)`, the version
 * read once from the package's own package.json, found by walking up from this module (from source, from dist/,
 * and installed as a package alike).
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE = "agent-definition-registry";

/** The package's version, or `unknown` when no package.json of the registry is found above this module. */
export function registryVersion(from = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from, up = 0; up < 6; dir = dirname(dir), up++) {
    const file = join(dir, "package.json");
    try {
      // A runtime may not let it look (Deno without read access to the file): then it is not known.
      if (!existsSync(file)) continue;
      const json = JSON.parse(readFileSync(file, "utf8")) as { name?: unknown; version?: unknown };
      if (json.name === PACKAGE && typeof json.version === "string") return json.version;
    } catch {
      // Not a package.json we can read: look further up.
    }
  }
  return "unknown";
}

/** What the prober sends as its User-Agent. */
export function probeUserAgent(version = registryVersion()): string {
  return `${PACKAGE}/${version} (+liveness probe)`;
}
