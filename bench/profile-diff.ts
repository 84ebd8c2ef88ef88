/**
 * Compares two V8 .cpuprofile files (`npm run bench -- --cpu-prof <dir>`, say before and after a change, or
 * REST against gRPC) by self time per request of each function: the functions whose cost grew most, then those
 * that shrank most (or left). Idle time is left out. Functions are matched by name, file (the checkout's own
 * folder dropped, so two worktrees compare) and line: a function whose line moved shows as one that left and
 * one that came.
 *
 *   node --import tsx bench/profile-diff.ts <a.cpuprofile> <requests of a> <b.cpuprofile> <requests of b> [top]
 */
import { readFileSync } from "node:fs";

interface Profile {
  readonly nodes: ReadonlyArray<{
    readonly id: number;
    readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  }>;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const [fileA, requestsA, fileB, requestsB, topArg] = process.argv.slice(2);
if (fileA === undefined || requestsA === undefined || fileB === undefined || requestsB === undefined) {
  console.error("usage: node --import tsx bench/profile-diff.ts <a> <requests of a> <b> <requests of b> [top]");
  process.exit(2);
}
const top = Number(topArg ?? 20);

/** A frame's key: its name and where it is, without the checkout's path or node_modules' prefix. */
function keyOf(frame: Profile["nodes"][number]["callFrame"]): string {
  const where = frame.url.replace(/^.*node_modules\//, "").replace(/^file:\/\/\/.*?\/(dist|src|bench)\//, "$1/");
  return `${frame.functionName || "(anonymous)"} ${where}:${frame.lineNumber}`;
}

/** Self time per request (µs) of each function of the profile, idle left out. */
function selfPerRequest(file: string, requests: number): Map<string, number> {
  const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
  const keys = new Map(profile.nodes.map((n) => [n.id, keyOf(n.callFrame)]));
  const self = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    const key = keys.get(id) ?? "(unknown)";
    if (!key.startsWith("(idle)")) self.set(key, (self.get(key) ?? 0) + (profile.timeDeltas[i] ?? 0) / requests);
  });
  return self;
}

const a = selfPerRequest(fileA, Number(requestsA));
const b = selfPerRequest(fileB, Number(requestsB));
const rows = [...new Set([...a.keys(), ...b.keys()])].map((key) => ({ key, a: a.get(key) ?? 0, b: b.get(key) ?? 0 }));
rows.sort((x, y) => y.b - y.a - (x.b - x.a));
const sum = (m: Map<string, number>) => [...m.values()].reduce((s, v) => s + v, 0);
const line = (r: (typeof rows)[number]) =>
  `${(r.b - r.a).toFixed(1).padStart(8)} ${r.a.toFixed(1).padStart(7)} ${r.b.toFixed(1).padStart(7)}  ${r.key}`;
console.log(`busy µs a request: a ${sum(a).toFixed(1)}, b ${sum(b).toFixed(1)}`);
console.log("  b - a       a       b  (µs a request, self time)");
for (const r of rows.slice(0, top)) console.log(line(r));
console.log("  ...");
for (const r of rows.slice(-top)) console.log(line(r));
