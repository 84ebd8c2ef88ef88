/**
 * The longest stretches of a V8 .cpuprofile without an idle sample: how long the event loop was held at a
 * time, and by what. For each of the `top` longest: its length, the project's own functions by inclusive time
 * in it (a function counts once per sample, however deep it recurs), and the functions by self time. Last, how
 * many stretches passed 10, 50 and 100 ms.
 *
 *   node --import tsx bench/profile-stretches.ts <file.cpuprofile> [top] [functions per stretch]
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly children?: readonly number[];
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const [file, topArg, functionsArg] = process.argv.slice(2);
if (file === undefined) {
  console.error("usage: node --import tsx bench/profile-stretches.ts <file.cpuprofile> [top] [functions]");
  process.exit(2);
}
const top = Number(topArg ?? 5);
const functions = Number(functionsArg ?? 10);
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

const label = (n: ProfileNode): string => {
  const { functionName, url, lineNumber } = n.callFrame;
  const where = url.replace(/^.*\/(node_modules\/|src\/|gen\/)/, "$1");
  return where === "" ? functionName || "(anonymous)" : `${functionName || "(anonymous)"} ${where}:${lineNumber + 1}`;
};
const own = (n: ProfileNode): boolean =>
  /\/(src|gen)\//.test(n.callFrame.url) && !n.callFrame.url.includes("node_modules");

/** A run of samples with no idle one: its start (ms from the profile's start) and its samples' indexes. */
interface Stretch {
  readonly at: number;
  readonly samples: number[];
  ms: number;
}
const stretches: Stretch[] = [];
let clock = 0;
let current: Stretch | undefined;
profile.samples.forEach((id, i) => {
  const delta = (profile.timeDeltas[i] ?? 0) / 1000;
  clock += delta;
  if (byId.get(id)?.callFrame.functionName === "(idle)") {
    current = undefined;
    return;
  }
  if (current === undefined) {
    current = { at: clock, samples: [], ms: 0 };
    stretches.push(current);
  }
  current.samples.push(i);
  // The time up to the next sample is this sample's.
  current.ms += (profile.timeDeltas[i + 1] ?? 0) / 1000;
});

const add = (map: Map<string, number>, key: string, value: number): void =>
  void map.set(key, (map.get(key) ?? 0) + value);
const ranked = (map: Map<string, number>, total: number): string[] =>
  [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, functions)
    .map(
      ([name, ms]) => `    ${ms.toFixed(0).padStart(5)} ms ${((100 * ms) / total).toFixed(0).padStart(3)} %  ${name}`,
    );

for (const stretch of [...stretches].sort((a, b) => b.ms - a.ms).slice(0, top)) {
  const inclusive = new Map<string, number>();
  const selfTime = new Map<string, number>();
  for (const i of stretch.samples) {
    const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    const seen = new Set<string>();
    let node = byId.get(profile.samples[i]!);
    add(selfTime, node === undefined ? "?" : label(node), ms);
    while (node !== undefined) {
      if (own(node)) seen.add(label(node));
      const up = parent.get(node.id);
      node = up === undefined ? undefined : byId.get(up);
    }
    for (const name of seen) add(inclusive, name, ms);
  }
  console.log(`stretch of ${stretch.ms.toFixed(0)} ms at ${(stretch.at / 1000).toFixed(1)} s`);
  console.log("  own functions, inclusive:");
  console.log(ranked(inclusive, stretch.ms).join("\n"));
  console.log("  self:");
  console.log(ranked(selfTime, stretch.ms).join("\n"));
}
const over = (ms: number) => stretches.filter((s) => s.ms > ms).length;
const busy = stretches.reduce((n, s) => n + s.ms, 0);
console.log(
  `${stretches.length} stretches, ${(busy / 1000).toFixed(1)} s busy of ${(clock / 1000).toFixed(1)} s; ` +
    `over 10 ms: ${over(10)}, over 50 ms: ${over(50)}, over 100 ms: ${over(100)}; longest ` +
    `${Math.max(...stretches.map((s) => s.ms)).toFixed(0)} ms`,
);
