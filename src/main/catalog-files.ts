/**
 * Reads the catalog's built files (dist/ui/, made by `npm run build` from ui/) into memory once, at start-up:
 * a few hundred KiB at most, then served without touching the disk. The same directory is found whether the
 * service runs from dist/ (`npm start`: dist/src/main/ -> dist/ui/) or from the sources (`npm run start:deno`, the
 * tests: src/main/ -> dist/ui/), by this module's own path (no look around the disk, which Deno's read permission
 * would refuse).
 */
import { readdir, readFile } from "node:fs/promises";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { CatalogFiles } from "../catalog/catalog.js";

/** The directory of the built catalog. */
export function catalogDir(): string {
  const above = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
  return basename(above) === "dist" ? join(above, "ui") : join(above, "dist", "ui");
}

/** Every file under `dir` by its path relative to it (`/`-separated); undefined when there is no index.html. */
export async function readCatalogFiles(dir: string = catalogDir()): Promise<CatalogFiles | undefined> {
  let entries: import("node:fs").Dirent[];
  try {
    entries = await readdir(dir, { recursive: true, withFileTypes: true });
  } catch (error: unknown) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  const files = new Map<string, Uint8Array>();
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files.set(relative(dir, path).split(sep).join("/"), new Uint8Array(await readFile(path)));
  }
  return files.has("index.html") ? files : undefined;
}
