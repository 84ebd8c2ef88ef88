/**
 * What an open watcher costs the service's heap (issue 50, item 2: the default of WATCH_MAX_OPEN). The service
 * runs in this process on a fresh SQLite database, under the heap bounds `npm start` gives it, with the
 * watch limits out of the way; a process of watchers (watch-worker.ts) opens `count` watchers of one tenant over
 * each protocol in turn, and the live heap (after a full collection) is read before and with them open.
 *
 *   node --import tsx --expose-gc --max-old-space-size=128 --max-semi-space-size=2 bench/watch-heap.ts [count]
 */
import { fork } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { getHeapStatistics } from "node:v8";
import { createApp } from "../src/app.js";
import { openLocalIssuer } from "../src/auth/local-issuer.js";
import { parseConfig } from "../src/config.js";
import { createLogger } from "../src/logger.js";
import { localIssuerKeyFile } from "../src/main/local-issuer-key-file.js";
import { createNodeServer, listen } from "../src/node/node-server.js";
import type { WatchProtocol, WatchWorkerRequest } from "./watch-worker.js";

const count = Number(process.argv[2] ?? 2_000);
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("run with --expose-gc");

/** The live heap after full collections, in bytes. */
async function liveHeap(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc?.();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return process.memoryUsage().heapUsed;
}

const dataDir = await mkdtemp(join(tmpdir(), "watch-heap-"));
const config = parseConfig({
  PORT: "0",
  DATA_DIR: dataDir,
  LOG_LEVEL: "silent",
  MAX_CONNECTIONS: String(count + 500),
  WATCH_MAX_OPEN: "1000000",
  WATCH_MAX_PER_TENANT: "999999",
  WATCH_MAX_PER_TOKEN: "999999",
  WATCH_MAX_HTTP1_PER_TENANT: String(count + 400),
});
const app = await createApp(config, {
  logger: createLogger("silent"),
  keyStore: localIssuerKeyFile(dataDir),
});
const node = createNodeServer(app);
const port = await listen(node.server, 0, "127.0.0.1");
const baseUrl = `http://127.0.0.1:${port}`;
const issuer = await openLocalIssuer(localIssuerKeyFile(dataDir), config.auth);
const authorization = `Bearer ${await issuer.issue({ tenant: "default", domains: ["Development"] })}`;
const list = await fetch(`${baseUrl}/api/asor/v1/default/agentDefinition?limit=1`, { headers: { authorization } });
const since = Number(((await list.json()) as { revision: string }).revision);
console.log(`heap limit ${(getHeapStatistics().heap_size_limit / 2 ** 20).toFixed(0)} MiB, ${count} watchers a run`);

for (const protocol of ["grpc", "sse"] as WatchProtocol[]) {
  const before = await liveHeap();
  const rssBefore = process.memoryUsage().rss;
  const child = fork(fileURLToPath(new URL("./watch-worker.ts", import.meta.url)), [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const opened = new Promise<{ errors: number; firstError?: string }>((resolve) =>
    child.on("message", (reply: { type: string; errors: number; firstError?: string }) => {
      if (reply.type === "opened") resolve(reply);
    }),
  );
  const open: WatchWorkerRequest = {
    type: "open",
    protocol,
    baseUrl,
    port,
    tenant: "default",
    authorization,
    count,
    since,
    capacity: 10,
  };
  child.send(open);
  const { errors, firstError } = await opened;
  const during = await liveHeap();
  const rssDuring = process.memoryUsage().rss;
  const per = (during - before) / (count - errors);
  console.log(
    `${protocol}: ${count - errors} open (${errors} failed${firstError ? `: ${firstError}` : ""}); live heap ` +
      `${(before / 2 ** 20).toFixed(1)} -> ${(during / 2 ** 20).toFixed(1)} MiB, ${(per / 1024).toFixed(1)} KiB ` +
      `a watcher; RSS ${(rssBefore / 2 ** 20).toFixed(0)} -> ${(rssDuring / 2 ** 20).toFixed(0)} MiB; ` +
      `open ${app.metrics === undefined ? "?" : await openGauge()}`,
  );
  child.kill();
  await new Promise((resolve) => child.once("exit", resolve));
  await new Promise((resolve) => setTimeout(resolve, 1_000));
}

async function openGauge(): Promise<string> {
  const text = (await app.metrics.render()).body;
  return /^asor_watches_open (\d+)$/m.exec(text)?.[1] ?? "?";
}

await node.close(1_000);
await app.close();
await rm(dataDir, { recursive: true, force: true });
