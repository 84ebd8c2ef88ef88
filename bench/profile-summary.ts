/**
 * Summarises a V8 .cpuprofile (from `npm run bench -- --cpu-prof <dir>`):
 * self time by layer of the request path (in % of the busy time: idle
 * excluded), by function, by package or source folder, and inclusive time of
 * the project's own functions, in % of the sampled time.
 *
 *   node --import tsx bench/profile-summary.ts <file.cpuprofile> [top]
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

const [file, topArg] = process.argv.slice(2);
if (file === undefined) {
  console.error("usage: node --import tsx bench/profile-summary.ts <file.cpuprofile> [top]");
  process.exit(2);
}
const top = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

const self = new Map<number, number>();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);

/** Where a frame's code lives: a package, a project folder, or node's internals. */
function area(url: string, name: string): string {
  if (url === "") return name.startsWith("(") ? name : "(native)";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  if (url.startsWith("node:")) return url.split("/")[0]!;
  const own = /\/(src\/[^/]+|gen|bench)\//.exec(url);
  return own ? own[1]! : url;
}
const label = (n: ProfileNode): string => {
  const { functionName, url, lineNumber } = n.callFrame;
  return `${functionName || "(anonymous)"} ${url.replace(/^.*\/(node_modules\/|src\/|gen\/)/, "$1")}:${lineNumber + 1}`;
};

const add = (map: Map<string, number>, key: string, value: number): void =>
  void map.set(key, (map.get(key) ?? 0) + value);
const selfByFunction = new Map<string, number>();
const selfByArea = new Map<string, number>();
const inclusiveOwn = new Map<string, number>();
for (const [id, time] of self) {
  const node = byId.get(id)!;
  add(selfByFunction, label(node), time);
  add(selfByArea, area(node.callFrame.url, node.callFrame.functionName), time);
  // Inclusive time of project functions: every distinct project frame on the stack gets the sample.
  const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const frame = byId.get(at)!;
    if (!/\/(src|gen)\//.test(frame.callFrame.url) || frame.callFrame.url.includes("node_modules")) continue;
    const key = label(frame);
    if (seen.has(key)) continue;
    seen.add(key);
    add(inclusiveOwn, key, time);
  }
}

/**
 * The layer of the request path a frame's code belongs to, or undefined for
 * node's internals and native code (their caller decides: a socket write
 * under mysql2 is storage, under node:_http_outgoing the edge).
 */
function layerOf(url: string, name: string): string | undefined {
  if (name === "(garbage collector)") return "garbage collection";
  if (name === "(idle)" || name === "(program)" || name === "(root)") return undefined;
  const rules: [RegExp, string][] = [
    [/node_modules\/(knex|mysql2|better-sqlite3|tarn)\/|\/src\/storage\//, "storage (knex, driver, SQL)"],
    [/node_modules\/(jose|openid-client|oauth4webapi)\/|\/src\/auth\//, "auth (token check, cache)"],
    [/node_modules\/@bufbuild\/(protovalidate|re2)\/|\/src\/domain\/validation/, "validation (protovalidate, rules)"],
    [
      new RegExp(
        /node_modules\/@bufbuild\/protobuf\/|/.source +
          /\/src\/transport\/(strict-json|rest\/json-decode|rest\/rest-response|encoded-message|rpc-message)|/.source +
          /\/src\/domain\/derived-fields/.source,
      ),
      "serialization (JSON, protobuf)",
    ],
    [
      /node_modules\/@connectrpc\/|\/src\/(edge|operations|service|transport)\//,
      "routing (edge, Connect, REST, operations)",
    ],
    [/\/src\/(logger|observability)|node_modules\/prom-client\//, "logging and metrics"],
    [
      /^node:(_http|http2|internal\/http2|internal\/js_stream)|\/src\/main\//,
      "HTTP (node:http, http2, the Node adapter)",
    ],
  ];
  for (const [pattern, layer] of rules) if (pattern.test(url)) return layer;
  return undefined;
}

const byLayer = new Map<string, number>();
let busy = 0;
for (const [id, time] of self) {
  const leaf = byId.get(id)!;
  if (leaf.callFrame.functionName === "(idle)") continue;
  busy += time;
  let layer: string | undefined;
  for (let at: number | undefined = id; at !== undefined && layer === undefined; at = parent.get(at)) {
    const frame = byId.get(at)!.callFrame;
    layer = layerOf(frame.url, frame.functionName);
  }
  add(byLayer, layer ?? "other (node internals, start-up)", time);
}

const print = (title: string, map: Map<string, number>): void => {
  console.log(`\n${title}`);
  for (const [key, time] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(`${((100 * time) / total).toFixed(1).padStart(6)}%  ${key}`);
};
console.log(`${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(1)} s busy`);
console.log("\nself time by layer, % of busy time (multiply by the CPU time of one request for its cost per layer)");
for (const [layer, time] of [...byLayer].sort((a, b) => b[1] - a[1]))
  console.log(`${((100 * time) / busy).toFixed(1).padStart(6)}%  ${layer}`);
print("self time by package / folder", selfByArea);
print("self time by function", selfByFunction);
print("inclusive time of the project's functions", inclusiveOwn);
