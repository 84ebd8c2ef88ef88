/**
 * What the bench reads about other processes from /proc (Linux): CPU time,
 * and peak resident memory (VmHWM), which it can reset per scenario by
 * writing 5 to /proc/<pid>/clear_refs (allowed for our own children).
 */

import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";

/** Clock ticks per second of utime and stime (USER_HZ); 100 on every common Linux. */
const ticksPerSecond = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU seconds (user + system) the process has used so far; NaN when it cannot be read. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: the fields we want follow the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
  } catch {
    return Number.NaN;
  }
}

/**
 * Seconds the process's main thread (a Node server's event loop) has so far spent runnable but waiting for a CPU
 * (the second field of /proc/<pid>/schedstat, in ns); NaN when it cannot be read (no schedstats in the kernel).
 */
export function runQueueSeconds(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[1]) / 1e9;
  } catch {
    return Number.NaN;
  }
}

/** The process's peak resident set size (VmHWM) in KiB; NaN when it cannot be read. */
export function peakRssKib(pid: number): number {
  return statusField(pid, "VmHWM");
}

/** The process's resident set size now (VmRSS) in KiB. */
export function rssKib(pid: number): number {
  return statusField(pid, "VmRSS");
}

function statusField(pid: number, name: string): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const match = new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status);
    return match === null ? Number.NaN : Number(match[1]);
  } catch {
    return Number.NaN;
  }
}

/**
 * Resets the peak RSS to the current RSS, so that the next VmHWM is the peak
 * of one scenario. Returns false where the kernel refuses (then VmHWM is the
 * peak since the process started).
 */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}

/** The pids of processes whose command name is one of `names` (e.g. the database server's). */
export function pidsNamed(names: readonly string[]): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (names.includes(readFileSync(`/proc/${entry}/comm`, "utf8").trim())) pids.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return pids;
}

/** The 1-minute load average. */
export function loadAverage(): number {
  return Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0]);
}

/** CPU seconds of a set of processes, sampled together. */
export function cpuSecondsOf(pids: readonly number[]): number {
  return pids.reduce((sum, pid) => sum + (cpuSeconds(pid) || 0), 0);
}

/** Busy and total CPU time of the whole machine so far, in clock ticks (from /proc/stat). */
export function machineTicks(): { busy: number; total: number } {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
  const ticks = line.trim().split(/\s+/).slice(1).map(Number);
  const total = ticks.reduce((a, b) => a + b, 0);
  // idle and iowait are fields 4 and 5 of the cpu line.
  const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0);
  return { busy: total - idle, total };
}

/**
 * The pid of the process listening on TCP `port` (found through the socket's
 * inode in /proc/net/tcp and the processes' fds), among `candidates`;
 * undefined when it cannot be told (e.g. no permission to read the fds).
 */
export function listenerPid(port: number, candidates: readonly number[]): number | undefined {
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is HEX_IP:HEX_PORT; state 0A is LISTEN; the inode is field 10.
      if (fields[3] === "0A" && Number.parseInt(fields[1]?.split(":")[1] ?? "", 16) === port && fields[9] !== undefined)
        inodes.add(fields[9]);
    }
  }
  for (const pid of candidates) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        const target = readlinkSync(`/proc/${pid}/fd/${fd}`, { encoding: "utf8" });
        const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
        if (inode !== undefined && inodes.has(inode)) return pid;
      }
    } catch {
      // Not ours to read, or gone.
    }
  }
  return undefined;
}

/**
 * Resolves once the process has used less than `idlePercent` of a core over
 * two 200 ms intervals in a row (it has finished what it was still doing),
 * or after `maxSeconds`. Resolves with whether it went idle.
 */
export async function untilIdle(pid: number, idlePercent = 5, maxSeconds = 15): Promise<boolean> {
  const deadline = Date.now() + maxSeconds * 1000;
  let quiet = 0;
  let last = cpuSeconds(pid);
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const now = cpuSeconds(pid);
    quiet = (100 * (now - last)) / 0.2 < idlePercent ? quiet + 1 : 0;
    last = now;
    if (quiet >= 2 || Number.isNaN(now)) return true;
  }
  return false;
}
