/**
 * Summarises a sampling heap profile (`bench/tail.ts --heap-profile`, allocations including those already
 * collected): bytes allocated per request by the function that allocated them and by package or folder.
 *
 *   node --import tsx bench/heap-summary.ts <allocations.heapprofile> <requests> [top]
 */
import { readFileSync } from "node:fs";

interface HeapNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly HeapNode[];
}
const [file, requestsArg, topArg] = process.argv.slice(2);
if (file === undefined || requestsArg === undefined) {
  console.error("usage: node --import tsx bench/heap-summary.ts <file.heapprofile> <requests> [top]");
  process.exit(2);
}
const requests = Number(requestsArg);
const top = Number(topArg ?? 25);
const { head } = JSON.parse(readFileSync(file, "utf8")) as { head: HeapNode };
const byFunction = new Map<string, number>();
const byPlace = new Map<string, number>();
let total = 0;
const place = (url: string): string => {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m !== null) return m[1]!;
  if (url.startsWith("node:")) return url;
  const src = /\/(src|dist\/src)\/([^/]+)/.exec(url);
  return src !== null ? `src/${src[2]}` : url === "" ? "(native)" : url;
};
const walk = (node: HeapNode): void => {
  if (node.selfSize > 0) {
    const f = node.callFrame;
    const name = `${f.functionName || "(anonymous)"} ${place(f.url)}:${f.lineNumber + 1}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + node.selfSize);
    byPlace.set(place(f.url), (byPlace.get(place(f.url)) ?? 0) + node.selfSize);
    total += node.selfSize;
  }
  for (const child of node.children) walk(child);
};
walk(head);
const show = (title: string, map: Map<string, number>) => {
  console.log(`\n${title}\n`);
  for (const [k, v] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(
      `${(v / requests / 1024).toFixed(2).padStart(8)} KiB/request  ${((100 * v) / total).toFixed(1).padStart(5)} ` +
        `%  ${k}`,
    );
};
console.log(`${(total / requests / 1024).toFixed(1)} KiB allocated per request (sampled), ${requests} requests`);
show("by place", byPlace);
show("by function", byFunction);
