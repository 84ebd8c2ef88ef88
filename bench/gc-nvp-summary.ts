/**
 * Summarises a service's stdout from `bench/tail.ts --variant 'name=--trace-gc-nvp' --out <dir>` (the file
 * `<dir>/service-<name>.out`): V8's line per collection between the service's own request log lines, each
 * collection counted for the protocol of the request logged last before it (the bench loads one door at a
 * time). Prints, per protocol, scavenges and mark-compacts per 1,000 requests and the bytes each request
 * had promoted to the old generation (what drives the mark-compacts).
 *
 *   node --import tsx bench/gc-nvp-summary.ts <service-name.out>
 */
import { readFileSync } from "node:fs";

const [file] = process.argv.slice(2);
if (file === undefined) {
  console.error("usage: node --import tsx bench/gc-nvp-summary.ts <service stdout with --trace-gc-nvp>");
  process.exit(2);
}
const by = new Map<string, { requests: number; scavenges: number; markCompacts: number; promoted: number }>();
let protocol: string | undefined;
for (const line of readFileSync(file, "utf8").split("\n")) {
  if (line.startsWith("{")) {
    const found = /"protocol":"(\w+)"/.exec(line)?.[1];
    if (found === undefined) continue;
    protocol = found;
    const entry = by.get(protocol) ?? { requests: 0, scavenges: 0, markCompacts: 0, promoted: 0 };
    entry.requests++;
    by.set(protocol, entry);
    continue;
  }
  const kind = / gc=(\w+)/.exec(line)?.[1];
  const entry = protocol === undefined ? undefined : by.get(protocol);
  if (kind === undefined || entry === undefined) continue;
  if (kind === "s") {
    entry.scavenges++;
    entry.promoted += Number(/ promoted=(\d+)/.exec(line)?.[1] ?? 0);
  } else if (kind === "mc" || kind === "mmc") entry.markCompacts++;
}
console.log("| protocol | requests | scavenges per 1,000 | mark-compacts per 1,000 | promoted KiB per request |");
console.log("|---|---:|---:|---:|---:|");
for (const [name, e] of by)
  console.log(
    `| ${name} | ${e.requests} | ${((1000 * e.scavenges) / e.requests).toFixed(1)} | ` +
      `${((1000 * e.markCompacts) / e.requests).toFixed(2)} | ${(e.promoted / e.requests / 1024).toFixed(2)} |`,
  );
