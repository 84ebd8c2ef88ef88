#!/usr/bin/env node
// Builds the catalog (ui/) with Vite into the directory given (scripts/build.mjs gives <its fresh dist>/ui):
// index.html, the app's script and style under assets/ with content hashes in their names (served immutable),
// and the files of ui/public/ as they are. No inline script or style is emitted (the catalog's
// Content-Security-Policy allows neither): the module preload polyfill is off (every browser the catalog
// supports preloads modules itself), and no asset is inlined as a data: URL.
//
//   node scripts/build-ui.mjs <outDir>
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "vite";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const outDir = process.argv[2];
if (outDir === undefined) {
  console.error("usage: node scripts/build-ui.mjs <outDir>");
  process.exit(2);
}
await build({
  configFile: false,
  root: join(ROOT, "ui"),
  base: "/ui/",
  logLevel: "warn",
  build: {
    outDir: resolve(outDir),
    emptyOutDir: true,
    target: "es2022",
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    cssCodeSplit: false,
    reportCompressedSize: false,
  },
});
