/**
 * The floor of the watch flood (bench/watch-flood.ts with FLOOD_SERVER=floor): the least a Node HTTP/1.1 server
 * can do for that scenario's requests. Bare node:http, no framework, no authentication, no database:
 *
 *   GET  /api/asor/v1/{tenant}/agentDefinitionEvents  the first FLOOR_STREAMS (default 100, the service's
 *        WATCH_MAX_PER_TOKEN) held open as SSE streams (a comment written at once), the others answered 429 with
 *        a tiny JSON body and the connection closed, as the service refuses a watch over its limit
 *   GET  /api/asor/v1/{tenant}/agentDefinition        a fixed JSON page of FLOOR_PAGE_BYTES (default 4,096)
 *   GET  /healthz                                     a tiny JSON body
 *   POST anything                                     the body read and dropped, 201 with `{}` (the bench's setup)
 *
 * FLOOR_SPIN_MS=<ms> holds the event loop that long (a busy loop) for each watch before it is answered: the floor
 * with a server's own work per watch, to find the cost per watch at which the list's p99 passes its limit.
 *
 * FLOOR_BACKLOG sets the listen backlog (server.listen({ backlog }); Node's default is 511, and the kernel caps it
 * at net.core.somaxconn). Prints `{"message":"floor listening","port":N,"backlog":B}` when ready.
 *
 *   PORT=0 FLOOR_BACKLOG=2048 node --import tsx bench/flood-floor.ts
 */
import { createServer, type ServerResponse } from "node:http";

const streams = Number(process.env.FLOOR_STREAMS ?? 100);
const pageBytes = Number(process.env.FLOOR_PAGE_BYTES ?? 4_096);
const spinMs = Number(process.env.FLOOR_SPIN_MS ?? 0);
const backlog = process.env.FLOOR_BACKLOG === undefined ? undefined : Number(process.env.FLOOR_BACKLOG);

/** A page of definitions' worth of JSON, `bytes` long: items of ~240 bytes, then spaces (still JSON). */
function fixedPage(bytes: number): Buffer {
  const items: string[] = [];
  const text = () => `{"total":20,"data":[${items.join(",")}]}`;
  for (let i = 0; text().length + 250 <= bytes; i++)
    items.push(`{"name":"Flood Other ${i}","description":"${"x".repeat(200)}"}`);
  return Buffer.from(text().padEnd(bytes, " "));
}

const page = fixedPage(pageBytes);
const healthy = Buffer.from('{"status":"ok"}');
const refused = Buffer.from('{"code":"RESOURCE_EXHAUSTED"}');
const created = Buffer.from("{}");

function answer(res: ServerResponse, status: number, body: Buffer, close = false): void {
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": body.length,
    ...(close ? { connection: "close" } : {}),
  });
  res.end(body);
}

let open = 0;
const server = createServer((req, res) => {
  const url = req.url ?? "/";
  if (req.method === "POST") {
    req.resume();
    req.on("end", () => answer(res, 201, created));
  } else if (url.includes("/agentDefinitionEvents")) {
    for (const until = performance.now() + spinMs; performance.now() < until; );
    if (open >= streams) return answer(res, 429, refused, true);
    open++;
    res.once("close", () => open--);
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.write(": open\n\n");
  } else if (url.startsWith("/healthz")) answer(res, 200, healthy);
  else if (url.includes("/agentDefinition")) answer(res, 200, page);
  else answer(res, 404, refused);
});
server.listen({ port: Number(process.env.PORT ?? 0), host: "127.0.0.1", backlog }, () => {
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  console.log(JSON.stringify({ message: "floor listening", port, backlog: backlog ?? "node's default" }));
});
process.once("SIGTERM", () => process.exit(0));
