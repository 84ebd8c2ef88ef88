/**
 * Reading settings from the environment, shared by every module that parses
 * some (config.ts, auth/auth-config.ts): a bad value is added to `problems`
 * (so every one is reported at once) and its default is used meanwhile.
 */
export interface EnvReader {
  /** The value, trimmed; undefined when unset or empty. */
  value(name: string): string | undefined;
  /** An integer from `min` to `max`; `fallback` when unset. */
  integer(name: string, fallback: number, min: number, max: number): number;
  /** `true` or `false`; `fallback` when unset. */
  flag(name: string, fallback: boolean): boolean;
}

export function envReader(env: Readonly<Record<string, string | undefined>>, problems: string[]): EnvReader {
  const value = (name: string): string | undefined => {
    const raw = env[name]?.trim();
    return raw === undefined || raw === "" ? undefined : raw;
  };
  return {
    value,
    integer(name, fallback, min, max) {
      const raw = value(name);
      if (raw === undefined) return fallback;
      const parsed = Number(raw);
      if (Number.isInteger(parsed) && parsed >= min && parsed <= max) return parsed;
      problems.push(`${name} must be an integer from ${min} to ${max}, not "${raw}"`);
      return fallback;
    },
    flag(name, fallback) {
      const raw = value(name);
      if (raw === undefined) return fallback;
      if (raw !== "true" && raw !== "false") problems.push(`${name} must be true or false, not "${raw}"`);
      return raw === "true" ? true : raw === "false" ? false : fallback;
    },
  };
}
