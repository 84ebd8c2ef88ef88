/**
 * `asor get <id>`, `asor list [<param>=<value>...]` and `asor export -o <dir> [<param>=<value>...]`: reads of the
 * registry. The list's parameters are the REST list's (docs/api.md "Search and paging"), passed as they are, so
 * the registry checks them; every page is read.
 */
import { createHash } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileJson, storedDefinition } from "./definition-form.js";
import { EXIT_OK, EXIT_PROBLEMS, usageFailure } from "./exit-codes.js";
import type { Output } from "./output.js";
import { type RegistryClient, RegistryRefusal, type StoredJson } from "./registry-client.js";

export async function getCommand(ids: readonly string[], registry: RegistryClient, output: Output) {
  if (ids.length !== 1) throw usageFailure("get takes one id: asor get <id>");
  let stored: StoredJson;
  try {
    stored = await registry.get(ids[0]!);
  } catch (error) {
    if (!(error instanceof RegistryRefusal) || error.status !== 404) throw error;
    output.message(`asor: ${error.message}`);
    return EXIT_PROBLEMS;
  }
  output.raw(JSON.stringify(stored, null, 2));
  return EXIT_OK;
}

/** `name=value` arguments as the list's query parameters. */
export function listParams(args: readonly string[]): [string, string][] {
  return args.map((arg) => {
    const eq = arg.indexOf("=");
    if (eq <= 0) throw usageFailure(`a filter is <param>=<value> (name=, provider=, tag=, status=...), not "${arg}"`);
    return [arg.slice(0, eq), arg.slice(eq + 1)];
  });
}

const text = (value: unknown): string => (typeof value === "string" ? value : "");

export async function listCommand(args: readonly string[], registry: RegistryClient, output: Output) {
  const found = await registry.list(listParams(args));
  for (const d of found) {
    const provider = text((d.provider as { id?: unknown } | undefined)?.id);
    const status = output.paint("dim", text(d.meta?.status));
    output.line(`${d.id}  ${text(d.name)} ${text(d.version)} (${provider})  ${status}`);
  }
  output.line(`${found.length} definition(s)`);
  output.document({ total: found.length, data: found });
  return EXIT_OK;
}

/** A file name's part from `text`: letters, digits, `.`, `_` and `-`, the rest as `-`. */
function slug(value: string): string {
  return value.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^-+|-+$/g, "") || "x";
}

/**
 * The file name of each definition: `<provider>_<name>_<version>.json` from its key, stable across exports;
 * when two keys make the same name, each gets 8 hex characters of its key's hash besides.
 */
export function exportNames(definitions: readonly StoredJson[]): string[] {
  const keys = definitions.map((d) => {
    const def = storedDefinition(d);
    return { def, key: JSON.stringify([def.name, def.provider?.id ?? "", def.version]) };
  });
  const names = keys.map(
    ({ def }) => `${slug(def.provider?.descriptor || def.provider?.id || "")}_${slug(def.name)}_${slug(def.version)}`,
  );
  const counts = new Map<string, number>();
  for (const n of names) counts.set(n, (counts.get(n) ?? 0) + 1);
  return names.map((n, i) =>
    counts.get(n) === 1
      ? `${n}.json`
      : `${n}-${createHash("sha256").update(keys[i]!.key).digest("hex").slice(0, 8)}.json`,
  );
}

export async function exportCommand(
  dir: string | undefined,
  args: readonly string[],
  registry: RegistryClient,
  output: Output,
) {
  if (dir === undefined) throw usageFailure("export needs a directory: asor export -o <dir>");
  const found = await registry.list(listParams(args));
  const names = exportNames(found);
  await mkdir(dir, { recursive: true });
  for (const [i, stored] of found.entries()) {
    const file = join(dir, names[i]!);
    await writeFile(file, `${JSON.stringify(fileJson(storedDefinition(stored)), null, 2)}\n`);
    output.line(`wrote ${file}`);
    output.progress("exporting", i + 1, found.length);
  }
  output.line(`${found.length} definition(s) exported to ${dir}`);
  output.document({ dir, files: names.map((n) => join(dir, n)) });
  return EXIT_OK;
}
