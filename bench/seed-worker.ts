/** A worker thread of the seeding (seed.ts): makes the batches it is sent (seed-rows.ts) and posts them back. */
import { parentPort } from "node:worker_threads";
import { type BatchSpec, makeBatch } from "./seed-rows.js";

parentPort?.on("message", async (spec: BatchSpec) => {
  try {
    parentPort?.postMessage({ batch: await makeBatch(spec) });
  } catch (error) {
    parentPort?.postMessage({ error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  }
});
