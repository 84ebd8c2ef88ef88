/**
 * How far V8 lets the old generation grow between two full collections, in the service's own process
 * (docs/decisions.md, "Memory"). Under the heap bounds `npm start` gives (`--max-old-space-size=128`) V8 picks
 * its smallest factor, 1.3: the old generation is collected again once it holds 30 % more than survived the last
 * collection, and each of those mark-compacts stops every request for 3-10 ms. At 100 % (a factor of 2) they
 * come a third as often per request, for about 20 MiB more peak RSS (BENCHMARKS.md, "The heap allowed to
 * double").
 *
 * Not on the embedded database: SQLite runs inside the process (its search worker thread has an isolate and a
 * connection of its own), and at a million definitions the RSS is already 137-139 MiB of the 150 the service keeps
 * under (150-156 with the setting). Not when
 * node's command line sets the flag itself: the operator's value stands. (Deno shows the process no `--v8-flags`:
 * under `npm run start:deno` the setting is made whatever they hold.)
 */
import { setFlagsFromString } from "node:v8";

/** The percent the service asks for on MySQL/MariaDB. */
const HEAP_GROWING_PERCENT = 100;

/** Whether the service should set the heap's growth: a database server, and no value on the command line. */
export function growsHeap(databaseUrl: string | undefined, execArgv: readonly string[]): boolean {
  if (databaseUrl === undefined) return false;
  return !execArgv.some((arg) => /^--heap[-_]growing[-_]percent(=|$)/.test(arg));
}

/** Sets V8's heap growth for this process when `growsHeap` says so; answers the percent set, if any. */
export function growHeap(databaseUrl: string | undefined, execArgv = process.execArgv): number | undefined {
  if (!growsHeap(databaseUrl, execArgv)) return undefined;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return HEAP_GROWING_PERCENT;
}
