import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

/** The registry running under Deno, as `npm run start:deno` starts it. */
export interface DenoServerProcess {
  readonly baseUrl: string;
  readonly port: number;
  readonly child: ChildProcess;
  /** The parsed start-up log line. */
  readonly startLine: Record<string, unknown>;
  /** From spawn to the start-up line (Deno compiles the TypeScript on a first run). */
  readonly startedInMs: number;
  /** Every line written so far, stdout and stderr. */
  readonly output: string[];
  /** SIGTERM, and resolves with the exit code. */
  stop(): Promise<number | null>;
}

/**
 * The `start:deno` script's command line, from package.json, split into words:
 * the test runs what the script runs, without npm and sh in between (sh does not
 * pass npm's SIGTERM on, so a stop through `npm run` would orphan the server).
 */
export function startDenoCommand(): string[] {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { scripts: Record<string, string> };
  const script = pkg.scripts["start:deno"];
  if (script === undefined) throw new Error("package.json has no start:deno script");
  return script.split(/\s+/);
}

/** Runs `start:deno` with `env` (PORT 0 unless given) and resolves once it logs that it listens. */
export function spawnDenoServer(env: Record<string, string>, startTimeoutMs = 120_000): Promise<DenoServerProcess> {
  const [command, ...args] = startDenoCommand();
  const started = performance.now();
  const child = spawn(command!, args, { env: { ...process.env, PORT: "0", LOG_LEVEL: "info", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  const output: string[] = [];
  createInterface({ input: child.stderr! }).on("line", (line) => output.push(line));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`deno did not start in ${startTimeoutMs} ms:\n${output.join("\n")}`));
    }, startTimeoutMs);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`deno exited with ${code} before listening:\n${output.join("\n")}`));
    });
    createInterface({ input: child.stdout! }).on("line", (line) => {
      output.push(line);
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line);
      } catch {
        return;
      }
      if (entry.message !== "agent definition registry listening" || typeof entry.url !== "string") return;
      clearTimeout(timer);
      const port = Number(new URL(entry.url).port);
      resolve({
        baseUrl: `http://127.0.0.1:${port}`,
        port,
        child,
        startLine: entry,
        startedInMs: Math.round(performance.now() - started),
        output,
        stop: () => {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
          return exited;
        },
      });
    });
  });
}

/** Runs `start:deno` with `env` to its end: its exit code and everything it wrote. */
export function runDenoToExit(env: Record<string, string>, timeoutMs = 120_000): Promise<{ code: number | null; output: string }> {
  const [command, ...args] = startDenoCommand();
  const child = spawn(command!, args, { env: { ...process.env, PORT: "0", ...env }, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`deno did not exit in ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}
