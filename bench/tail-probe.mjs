// Loaded into the service by `bench/tail.ts` (`node --import <this file> ...`), never by production:
// writes each garbage collection the isolate reports (epoch start in ms, pause in ms, kind) to the
// file named by TAIL_PROBE_FILE, a tab-separated line each, so that the bench can lay the pauses
// beside h2load's per-request log (whose start times are epoch microseconds too).
import { appendFileSync } from "node:fs";
import { constants, PerformanceObserver, performance } from "node:perf_hooks";

const file = process.env.TAIL_PROBE_FILE;
if (file !== undefined && file !== "") {
  const kinds = {
    [constants.NODE_PERFORMANCE_GC_MINOR]: "scavenge",
    [constants.NODE_PERFORMANCE_GC_MAJOR]: "mark-compact",
    [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: "incremental",
    [constants.NODE_PERFORMANCE_GC_WEAKCB]: "weak-callbacks",
  };
  let pending = [];
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = kinds[entry.detail?.kind] ?? String(entry.detail?.kind);
      pending.push(`${(performance.timeOrigin + entry.startTime).toFixed(3)}\t${entry.duration.toFixed(3)}\t${kind}\n`);
    }
  }).observe({ entryTypes: ["gc"] });
  const flush = () => {
    if (pending.length === 0) return;
    appendFileSync(file, pending.join(""));
    pending = [];
  };
  setInterval(flush, 250).unref();
  process.once("exit", flush);
}

// TAIL_HEAP_PROFILE=<file>: V8's sampling heap profiler from the start, counting what the collector has
// already freed too (what a request allocates, not what stays); SIGUSR2 writes the profile and starts
// a fresh one (so that a bench can take one over its measured part only).
const heapFile = process.env.TAIL_HEAP_PROFILE;
if (heapFile !== undefined && heapFile !== "") {
  const { Session } = await import("node:inspector");
  const { renameSync, writeFileSync } = await import("node:fs");
  const session = new Session();
  session.connect();
  const post = (method, params) =>
    new Promise((resolve, reject) =>
      session.post(method, params, (err, result) => (err ? reject(err) : resolve(result))),
    );
  const start = () =>
    post("HeapProfiler.startSampling", {
      samplingInterval: 512,
      // TAIL_HEAP_LIVE=1: only what is still in the heap when the profile is taken (after two minor GCs when
      // the service runs with --expose-gc): what outlived the young generation, garbage not yet swept included.
      // TAIL_HEAP_PROMOTED=1: what outlived the young generation (promoted), whether or not it died since.
      includeObjectsCollectedByMajorGC: process.env.TAIL_HEAP_LIVE !== "1",
      includeObjectsCollectedByMinorGC: process.env.TAIL_HEAP_LIVE !== "1" && process.env.TAIL_HEAP_PROMOTED !== "1",
    });
  await post("HeapProfiler.enable");
  await start();
  process.on("SIGUSR2", async () => {
    if (
      (process.env.TAIL_HEAP_LIVE === "1" || process.env.TAIL_HEAP_PROMOTED === "1") &&
      typeof globalThis.gc === "function"
    ) {
      globalThis.gc({ type: "minor" });
      globalThis.gc({ type: "minor" });
    }
    const { profile } = await post("HeapProfiler.stopSampling");
    writeFileSync(`${heapFile}.tmp`, JSON.stringify(profile));
    renameSync(`${heapFile}.tmp`, heapFile);
    await start();
  });
}
