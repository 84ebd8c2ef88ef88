import { writeSync } from "node:fs";
import process from "node:process";

/** One JSON line per event on stdout/stderr; never given tokens or secrets. */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

export type LogLevel = "debug" | "info" | "warn" | "error" | "silent";

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

function serialize(value: unknown): unknown {
  if (value instanceof Error) {
    return { name: value.name, message: value.message, stack: value.stack, cause: serialize(value.cause) };
  }
  return value;
}

/**
 * Writes stdout lines in batches, one write per turn of the event loop: the
 * access log has a line per request, and a synchronous write per line (stdout
 * to a file) was 16 % of a REST GET's CPU (BENCHMARKS.md). Lines still
 * pending when the process exits are written synchronously, so an orderly
 * exit loses none; only a kill mid-turn can.
 */
let stdoutLine: ((line: string) => void) | undefined;
function batchedStdout(): (line: string) => void {
  let pending: string[] = [];
  const flush = (): void => {
    if (pending.length === 0) return;
    const chunk = pending.join("");
    pending = [];
    process.stdout.write(chunk);
  };
  process.once("exit", () => {
    if (pending.length === 0) return;
    try {
      writeSync(1, pending.join(""));
    } catch {
      // stdout is gone: nothing left to tell.
    }
    pending = [];
  });
  return (line) => {
    if (pending.length === 0) setImmediate(flush);
    pending.push(`${line}\n`);
  };
}

/** A logger writing JSON lines at or above `level`: info to stdout (batched), warnings and errors to stderr at once. */
export function createLogger(level: LogLevel = "info"): Logger {
  const write = (at: Exclude<LogLevel, "silent">, message: string, fields: Record<string, unknown> = {}): void => {
    if (RANK[at] < RANK[level]) return;
    const entry: Record<string, unknown> = { time: new Date().toISOString(), level: at, message };
    for (const [key, value] of Object.entries(fields)) entry[key] = serialize(value);
    const line = JSON.stringify(entry);
    if (at === "error" || at === "warn") console.error(line);
    else (stdoutLine ??= batchedStdout())(line);
  };
  return {
    info: (message, fields) => write("info", message, fields),
    warn: (message, fields) => write("warn", message, fields),
    error: (message, fields) => write("error", message, fields),
  };
}
