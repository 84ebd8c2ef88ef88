// `node --max-old-space-size=128 --max-semi-space-size=2 bench/http2-tail.mjs [rounds]`: the tail of a bare
// node:http2 server with no registry behind it (issue 19), under the wire bench's load shape (h2load, one
// connection, ten streams, 4 s): a REST GET's exchange (HEADERS in; HEADERS, DATA out) and a gRPC call's
// (HEADERS, DATA in; HEADERS, DATA, trailers out), each answering ~1.7 KB, in turn. Prints p50, p99 and
// their ratio from h2load's per-request log, and the garbage collections per 1,000 requests: what the
// runtime alone gives the ratio at this shape, the floor under the registry's.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { constants, PerformanceObserver } from "node:perf_hooks";

const rounds = Number(process.argv[2] ?? 3);
const dir = mkdtempSync(join(tmpdir(), "asor-http2-tail-"));
writeFileSync(join(dir, "request"), Buffer.from([0, 0, 0, 0, 3, 10, 1, 65]));
const answer = Buffer.alloc(1705, 7);

let gc = { minor: 0, major: 0, ms: 0 };
let runs = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    if (entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) gc.minor++;
    if (entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) gc.major++;
    gc.ms += entry.duration;
  }
}).observe({ entryTypes: ["gc"] });

const server = createServer();
server.on("stream", (stream, headers) => {
  if (headers[":path"] === "/rest") {
    stream.respond({ ":status": 200, "content-type": "application/json" });
    stream.end(answer);
    return;
  }
  stream.on("data", () => undefined);
  stream.once("end", () => {
    stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
    stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    stream.end(answer);
  });
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const { port } = server.address();

const run = (path, body) =>
  new Promise((resolve, reject) => {
    gc = { minor: 0, major: 0, ms: 0 };
    const log = join(dir, `log-${++runs}`); // h2load appends to a log file that exists
    const args = ["-c1", "-m10", "-D", "4", `--log-file=${log}`];
    if (body) args.push("-d", join(dir, "request"));
    const h2load = spawn("h2load", [...args, `http://127.0.0.1:${port}${path}`], { stdio: "ignore" });
    h2load.once("error", reject);
    h2load.once("exit", () => {
      const ms = readFileSync(log, "utf8")
        .trim()
        .split("\n")
        .map((line) => Number(line.split("\t")[2]) / 1000)
        .sort((a, b) => a - b);
      const at = (q) => ms[Math.floor(q * ms.length)];
      const per1000 = (n) => ((1000 * n) / ms.length).toFixed(2);
      resolve(
        `| ${path === "/rest" ? "REST GET shape" : "gRPC call shape"} | ${ms.length} | ${at(0.5).toFixed(2)} | ` +
          `${at(0.99).toFixed(2)} | ${(at(0.99) / at(0.5)).toFixed(1)}x | ${per1000(gc.minor)} / ` +
          `${per1000(gc.major)} | ` +
          `${per1000(gc.ms)} |`,
      );
    });
  });

console.log(
  "| exchange (bare node:http2) | requests | p50 ms | p99 ms | p99/p50 " +
    "| scavenges / mark-compacts per 1,000 | GC ms per 1,000 |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|");
for (let round = 0; round < rounds; round++)
  for (const [path, body] of [
    ["/rest", false],
    ["/grpc", true],
  ])
    console.log(await run(path, body));
process.exit(0);
