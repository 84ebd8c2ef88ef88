#!/usr/bin/env node
// `npm start`, `npm run admin`, `npm run token`: runs a compiled entry point
// from dist/ under plain node, building dist/ first when it is missing or stale
// (scripts/build.mjs; a fresh dist/ costs a few stat calls, no tsc).
//
//   node scripts/start.mjs                       the service: package.json's "main"
//   node scripts/start.mjs dist/src/main/x.js ...  another entry point, with its arguments
//
// The entry runs in this process (imported, with process.argv as if node had
// been started on it), so signals reach the server itself with nothing in
// between. In a container, build at image build time (`npm run build`) and run
// `node dist/src/main/node.js` (package.json "main"), which skips the check.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { buildIfStale, ROOT } from "./build.mjs";

const [given, ...args] = process.argv.slice(2);
if (given !== undefined && !given.endsWith(".js")) {
  console.error(
    `usage: node scripts/start.mjs [<compiled entry point>.js [args...]], not: ${process.argv.slice(2).join(" ")}\n` +
      "(the service takes no arguments: it is configured by environment variables)",
  );
  process.exit(2);
}
const entry = resolve(ROOT, given ?? JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).main);
try {
  buildIfStale();
} catch (error) {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
}
process.argv = [process.argv[0], entry, ...args];
await import(pathToFileURL(entry).href);
