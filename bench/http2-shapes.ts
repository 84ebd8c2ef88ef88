/**
 * `node --import tsx bench/http2-shapes.ts`: what node:http2 itself costs per exchange shape, with no
 * registry behind it (issue 19): a bare server answering ~1.7 KB to h2load (one connection, ten streams),
 * three rounds of each shape in turn:
 * - a REST GET: HEADERS in (END_STREAM), HEADERS and DATA out;
 * - a gRPC call: HEADERS and DATA in, the body read, HEADERS, DATA and trailers out;
 * - the two halves of that difference: a body read without trailers, trailers without a body.
 * The gRPC shape's ceiling bounds how close the gRPC door can come to the REST one on this runtime.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { ensureH2load } from "./wire.js";

const answer = Buffer.alloc(1705, 7);
answer.writeUInt32BE(1700, 1);
answer[0] = 0;
const requestFile = join(mkdtempSync(join(tmpdir(), "asor-shapes-")), "request");
writeFileSync(requestFile, Buffer.from([0, 0, 0, 0, 3, 10, 1, 65]));

const withTrailers = (stream: ServerHttp2Stream): void => {
  stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
  stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
  stream.end(answer);
};
const afterBody = (stream: ServerHttp2Stream, then: () => void): void => {
  stream.on("data", () => undefined);
  stream.once("end", then);
};
const shapes: Record<string, { path: string; body: boolean; serve(stream: ServerHttp2Stream): void }> = {
  "REST GET": {
    path: "/rest",
    body: false,
    serve: (stream) => {
      stream.respond({ ":status": 200, "content-type": "application/json" });
      stream.end(answer);
    },
  },
  "gRPC call": { path: "/grpc", body: true, serve: (stream) => afterBody(stream, () => withTrailers(stream)) },
  "body read, no trailers": {
    path: "/body",
    body: true,
    serve: (stream) =>
      afterBody(stream, () => {
        stream.respond({ ":status": 200, "content-type": "application/grpc+proto" });
        stream.end(answer);
      }),
  },
  "trailers, no body": { path: "/trailers", body: false, serve: withTrailers },
};

ensureH2load((m) => console.error(m));
const server = createServer();
server.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
  const shape = Object.values(shapes).find((s) => s.path === headers[":path"]);
  shape === undefined ? stream.close() : shape.serve(stream);
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const port = (server.address() as AddressInfo).port;
const results: Record<string, number[]> = {};
for (let round = 0; round < 3; round++) {
  for (const [name, shape] of Object.entries(shapes)) {
    const args = [
      "-c1",
      "-m10",
      "-D",
      "4",
      ...(shape.body ? ["-d", requestFile] : []),
      `http://127.0.0.1:${port}${shape.path}`,
    ];
    const { stdout } = await promisify(execFile)("h2load", args, { encoding: "utf8" });
    (results[name] ??= []).push(Number(/finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(stdout)?.[1]));
  }
}
console.log("| exchange shape (bare node:http2) | req/s, rounds 1-3 | of REST GET, by round |");
console.log("|---|---:|---:|");
const rest = results["REST GET"] ?? [];
for (const [name, rps] of Object.entries(results))
  console.log(
    `| ${name} | ${rps.map((r) => r.toFixed(0)).join(" / ")} ` +
      `| ${rps.map((r, i) => (r / (rest[i] ?? r)).toFixed(2)).join(" / ")} |`,
  );
process.exit(0);
