/**
 * One scenario, measured: the load generator runs the job; over exactly its
 * measured window (after the warm-up) we take the CPU time of the server,
 * the load generator and the database server, the machine's busy time, and
 * the server's peak RSS (reset to its current RSS at the start of the window).
 */
import { cpus } from "node:os";
import type { LoadJob, LoadResult } from "./load-job.js";
import { cpuSeconds, cpuSecondsOf, machineTicks, peakRssKib, resetPeakRss } from "./proc-stats.js";
import type { LoadProcess } from "./processes.js";

export interface Measurement extends LoadResult {
  /** CPU used by each process over the window, in % of one core. */
  readonly serverCpu: number;
  readonly clientCpu: number;
  /** NaN where the database runs inside the server (SQLite). */
  readonly databaseCpu: number;
  /** How busy both cores were over the window, in % of the machine (others' work included). */
  readonly machineBusy: number;
  /**
   * CPU used by everything else on the machine (other users' work, the kernel's loopback traffic), in % of
   * one core.
   */
  readonly othersCpu: number;
  /** The server's peak RSS within the window, MiB. */
  readonly peakRssMib: number;
}

export async function measure(
  load: LoadProcess,
  job: LoadJob,
  serverPid: number,
  databasePids: readonly number[],
): Promise<Measurement> {
  let start:
    | { at: number; server: number; client: number; database: number; machine: { busy: number; total: number } }
    | undefined;
  const result = await load.run<LoadJob, LoadResult>(job, () => {
    resetPeakRss(serverPid);
    start = {
      at: performance.now(),
      server: cpuSeconds(serverPid),
      client: cpuSeconds(load.pid),
      database: cpuSecondsOf(databasePids),
      machine: machineTicks(),
    };
  });
  const seconds = (performance.now() - (start?.at ?? 0)) / 1000;
  const machine = machineTicks();
  const percent = (now: number, then: number | undefined): number =>
    then === undefined ? Number.NaN : (100 * (now - then)) / seconds;
  const serverCpu = percent(cpuSeconds(serverPid), start?.server);
  const clientCpu = percent(cpuSeconds(load.pid), start?.client);
  const databaseCpu = databasePids.length === 0 ? Number.NaN : percent(cpuSecondsOf(databasePids), start?.database);
  const machineBusy =
    start === undefined
      ? Number.NaN
      : (100 * (machine.busy - start.machine.busy)) / Math.max(1, machine.total - start.machine.total);
  return {
    ...result,
    // NaN (no successful request) crosses the IPC channel as null.
    p50: result.p50 ?? Number.NaN,
    p99: result.p99 ?? Number.NaN,
    serverCpu,
    clientCpu,
    databaseCpu,
    machineBusy,
    othersCpu: Math.max(
      0,
      machineBusy * cpus().length - serverCpu - clientCpu - (Number.isFinite(databaseCpu) ? databaseCpu : 0),
    ),
    peakRssMib: peakRssKib(serverPid) / 1024,
  };
}

/**
 * What most likely limits a scenario, from where the CPU went: a process at
 * or near one full core is the bottleneck (Node serves on one thread; the
 * database can use both cores); both cores busy means the machine; otherwise
 * requests spend their time waiting (row locks, fsync, round trips).
 */
export function limitOf(m: Measurement): string {
  const saturated = (cpu: number): boolean => cpu >= 85;
  const limits: string[] = [];
  if (saturated(m.serverCpu)) limits.push("server CPU");
  if (saturated(m.databaseCpu)) limits.push("database CPU");
  if (saturated(m.clientCpu)) limits.push("client CPU");
  if (limits.length === 0 && m.machineBusy >= 85) limits.push("both cores");
  if (limits.length === 0) limits.push("waiting (no process busy)");
  return limits.join(" + ");
}
