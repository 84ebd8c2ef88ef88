import type { Logger } from "../../src/logger.js";

/**
 * A logger that keeps each line it would have written, as the JSON it would
 * have been (an Error as its name, message and stack).
 */
export function capturingLogger(): Logger & { lines: Record<string, any>[] } {
  const lines: Record<string, any>[] = [];
  const write =
    (level: string) =>
    (message: string, fields: Record<string, unknown> = {}) =>
      void lines.push(
        JSON.parse(
          JSON.stringify({ level, message, ...fields }, (_k, v) =>
            v instanceof Error ? { name: v.name, message: v.message, stack: v.stack } : v,
          ),
        ),
      );
  return { lines, info: write("info"), warn: write("warn"), error: write("error") };
}
