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

/** A logger writing JSON lines at or above `level`. */
export function createLogger(level: LogLevel = "info"): Logger {
  const write = (at: Exclude<LogLevel, "silent">, message: string, fields: Record<string, unknown> = {}): void => {
    if (RANK[at] < RANK[level]) return;
    const entry: Record<string, unknown> = { time: new Date().toISOString(), level: at, message };
    for (const [key, value] of Object.entries(fields)) entry[key] = serialize(value);
    const line = JSON.stringify(entry);
    if (at === "error" || at === "warn") console.error(line);
    else console.log(line);
  };
  return {
    info: (message, fields) => write("info", message, fields),
    warn: (message, fields) => write("warn", message, fields),
    error: (message, fields) => write("error", message, fields),
  };
}
