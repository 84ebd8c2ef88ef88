import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import packageJson from "../../package.json" with { type: "json" };
import { startDenoCommand } from "./deno-server-process.js";
import { npmScriptCommand } from "./npm-script.js";

/** A registry running as its own process (`npm start`'s entrypoint). */
export interface ServerProcess {
  readonly baseUrl: string;
  readonly port: number;
  readonly child: ChildProcess;
  /** Everything the process wrote to stderr so far (warnings and errors are logged there). */
  stderr(): string;
  /** SIGTERM, and resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** The runtimes the service runs under: Node (`npm start`) and Deno (`npm run start:deno`). */
export type Runtime = "node" | "deno";

/** Every runtime, Node first: the suites that start servers run under each. */
export const RUNTIMES: readonly Runtime[] = ["node", "deno"];

/** The V8 flags `npm start` runs the service with (package.json `config.nodeFlags`), for tests of its memory bounds. */
export const PRODUCTION_NODE_FLAGS: readonly string[] = (
  packageJson as { config: { nodeFlags: string } }
).config.nodeFlags.split(" ");

/**
 * Starts the service in a child process on a free port with `env`, under `runtime` as `npm start` (the compiled
 * dist/, built first when stale) or `npm run start:deno` runs it, and resolves once it logs that it listens.
 * `nodeFlags` go to node where `npm start` puts its own (e.g. PRODUCTION_NODE_FLAGS).
 */
export async function spawnServer(
  env: Record<string, string>,
  runtime: Runtime = "node",
  nodeFlags: readonly string[] = [],
): Promise<ServerProcess> {
  // node itself, not npm: the server gets the signals a test sends it, with nothing in between.
  const [command, ...args] = runtime === "deno" ? startDenoCommand() : await npmScriptCommand("start", nodeFlags);
  // Deno compiles the TypeScript on its first start (about 4 s; later starts take it from its cache).
  const startTimeoutMs = runtime === "deno" ? 120_000 : 30_000;
  const child = spawn(command!, args, {
    // The prober off unless the test turns it on, as testConfig has it (server.ts).
    env: { ...process.env, PORT: "0", LOG_LEVEL: "info", PROBE_ENABLED: "false", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const stderr: string[] = [];
  child.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`server did not start in ${startTimeoutMs / 1000} s: ${stderr.join("")}`)),
      startTimeoutMs,
    );
    child.once("exit", (code) => reject(new Error(`server exited with ${code}: ${stderr.join("")}`)));
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      let entry: { message?: string; url?: string };
      try {
        entry = JSON.parse(line);
      } catch {
        return;
      }
      if (entry.message !== "agent definition registry listening" || entry.url === undefined) return;
      clearTimeout(timer);
      const port = Number(new URL(entry.url).port);
      resolve({
        baseUrl: `http://127.0.0.1:${port}`,
        port,
        child,
        stderr: () => stderr.join(""),
        stop: () => {
          child.kill("SIGTERM");
          return exited;
        },
      });
    });
  });
}
