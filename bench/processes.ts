/**
 * The processes of a bench run, each on its own: the service (what production
 * runs: `node <config.nodeFlags> dist/src/main/node.js`, the compiled entry of package.json's
 * "main", built first when stale; node itself, not `npm start`, so that the pid
 * we measure is the server's), the floor server, and the load generator. All
 * listen on loopback only.
 */
import { type ChildProcess, execFileSync, fork, spawn } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { denoPath, denoServeArgs } from "../scripts/deno.mjs";

/** The repository root: the floor server and the load generator are started from there. */
export const repoRoot = fileURLToPath(new URL("..", import.meta.url));

/** How to start a server: node's arguments (after any `nodeArgs` of the run) and the working directory. */
export interface ServerCommand {
  /** The program, when it is not node (Deno); `nodeArgs` do not apply to it. */
  readonly executable?: string;
  readonly args: readonly string[];
  readonly cwd: string;
}

/** A TypeScript file of this checkout run under node with tsx (the floor server: bench code, not production). */
export function tsxCommand(script: string): ServerCommand {
  return { args: ["--import", "tsx", script], cwd: repoRoot };
}

/**
 * The service of a checkout (`serviceDir`, default this one) as production runs
 * it: the compiled entry, package.json's "main", after the checkout's build.
 * This checkout builds only when dist/ is stale (`node scripts/build.mjs
 * --if-stale`); another one runs its own `npm run build`. A checkout from
 * before the build (no "build" script) runs its source under tsx, as its
 * `npm start` did: `node --import tsx <dir>/src/main/node.ts`.
 */
export function serviceCommand(serviceDir: string | undefined): ServerCommand {
  const dir = resolve(serviceDir ?? repoRoot);
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
    main?: string;
    scripts?: Record<string, string>;
    config?: { nodeFlags?: string };
  };
  if (pkg.scripts?.build === undefined) {
    const source = join(dir, "src/main/node.ts");
    if (!existsSync(source))
      throw new Error(`${dir} has neither a build script nor src/main/node.ts: which service is that?`);
    return tsxCommand(source);
  }
  if (pkg.main === undefined)
    throw new Error(`${join(dir, "package.json")} has a build script but no "main" (the compiled entry to run)`);
  // The build's own messages go to our stderr; a failing build throws with tsc's errors shown above.
  if (serviceDir === undefined)
    execFileSync(process.execPath, ["scripts/build.mjs", "--if-stale"], { cwd: dir, stdio: ["ignore", 2, 2] });
  else execFileSync("npm", ["run", "-s", "build"], { cwd: dir, stdio: ["ignore", 2, 2] });
  // The V8 flags `npm start` runs the service with (package.json config.nodeFlags), if the checkout has them.
  const flags = (pkg.config?.nodeFlags ?? "").split(" ").filter((flag) => flag !== "");
  return { args: [...flags, join(dir, pkg.main)], cwd: dir };
}

/**
 * The service of a checkout (`serviceDir`, default this one) under Deno, as its `npm run start:deno` runs it
 * (its scripts/deno.mjs), without the launcher in between, so that the pid measured is Deno's. `env` gives
 * DATA_DIR, which the permissions name. Another checkout is built first (the catalog's pages) and asked for its
 * own command line, which names its own sources.
 */
export function denoServiceCommand(env: Record<string, string>, serviceDir?: string): ServerCommand {
  if (serviceDir === undefined) return { executable: denoPath(), args: denoServeArgs(env), cwd: repoRoot };
  const dir = resolve(serviceDir);
  const launcher = join(dir, "scripts/deno.mjs");
  if (!existsSync(launcher)) throw new Error(`${dir} has no scripts/deno.mjs: how does it run under Deno?`);
  execFileSync("npm", ["run", "-s", "build"], { cwd: dir, stdio: ["ignore", 2, 2] });
  const ask =
    `const m = await import(${JSON.stringify(pathToFileURL(launcher).href)});` +
    "const args = m.denoServeArgs(JSON.parse(process.argv[1]));" +
    "process.stdout.write(JSON.stringify({ executable: m.denoPath(), args }));";
  const answer = execFileSync(process.execPath, ["--input-type=module", "-e", ask, JSON.stringify(env)], {
    cwd: dir,
    encoding: "utf8",
  });
  const { executable, args } = JSON.parse(answer) as { executable: string; args: string[] };
  return { executable, args, cwd: dir };
}

/** A server process on a port of loopback. */
export interface ServerProcess {
  readonly name: string;
  readonly pid: number;
  readonly port: number;
  readonly baseUrl: string;
  /** What the process wrote to stderr (the service logs warnings and errors there). */
  stderr(): string;
  /** SIGTERM; resolves with the exit code once it has exited (SIGKILL after 10 s). */
  stop(): Promise<number | null>;
}

/**
 * Starts `node [nodeArgs] <command args>` and resolves once it prints a JSON
 * line with `message` and a port (`port`, or `url`). Its stdout and stderr go
 * to files in `logDir` (`<name>.out`, `<name>.err`), not to a pipe: the service
 * logs a line per request, and a pipe would make the bench's own process read
 * them all. Rejects when the process exits first or is not ready in 60 s.
 */
export async function startServer(
  name: string,
  command: ServerCommand,
  readyMessage: string,
  env: Record<string, string>,
  logDir: string,
  nodeArgs: readonly string[] = [],
): Promise<ServerProcess> {
  const base = join(logDir, name.replace(/\W+/g, "-"));
  const out = openSync(`${base}.out`, "w");
  const err = openSync(`${base}.err`, "w");
  if (command.executable !== undefined && nodeArgs.length > 0)
    throw new Error(`${name}: node's arguments (${nodeArgs.join(" ")}) do not apply to ${command.executable}`);
  const child = spawn(
    command.executable ?? process.execPath,
    [...(command.executable === undefined ? nodeArgs : []), ...command.args],
    {
      cwd: command.cwd,
      env: { ...process.env, ...env },
      stdio: ["ignore", out, err],
    },
  );
  closeSync(out);
  closeSync(err);
  const stderr = (): string => tail(`${base}.err`, 20_000);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`${name} exited with ${child.exitCode ?? child.signalCode} before it was ready: ${stderr()}`);
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${name} did not start in 60 s: ${stderr()}`);
    }
    const port = readyPort(`${base}.out`, readyMessage);
    if (port !== undefined) {
      return {
        name,
        pid: child.pid!,
        port,
        baseUrl: `http://127.0.0.1:${port}`,
        stderr,
        stop: () => stopChild(child, exited),
      };
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The port of the ready line in a log file, once it is there. */
function readyPort(file: string, message: string): number | undefined {
  for (const line of readFileSync(file, "utf8").split("\n")) {
    let entry: { message?: string; port?: number; url?: string };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    if (entry.message === message) return entry.port ?? Number(new URL(entry.url ?? "http://x:0").port);
  }
  return undefined;
}

/** The last `bytes` of a file. */
function tail(file: string, bytes: number): string {
  try {
    const text = readFileSync(file, "utf8");
    return text.slice(-bytes);
  } catch {
    return "";
  }
}

async function stopChild(child: ChildProcess, exited: Promise<number | null>): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  try {
    return await exited;
  } finally {
    clearTimeout(timer);
  }
}

/** The load generator: a forked process that runs one job at a time on request (see load-worker.ts). */
export interface LoadProcess {
  readonly pid: number;
  /** Sends `job`; `onMeasuring` is called when the measured part starts (after the warm-up). */
  run<J, R>(job: J, onMeasuring: () => void): Promise<R>;
  stop(): Promise<void>;
}

export function startLoadProcess(): LoadProcess {
  const child = fork(fileURLToPath(new URL("./load-worker.ts", import.meta.url)), [], {
    cwd: repoRoot,
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  let pending: { resolve(value: unknown): void; reject(error: Error): void; onMeasuring(): void } | undefined;
  child.on("message", (message: { type: string; result?: unknown; error?: string }) => {
    if (pending === undefined) return;
    if (message.type === "measuring") return pending.onMeasuring();
    const { resolve, reject } = pending;
    pending = undefined;
    if (message.type === "result") resolve(message.result);
    else reject(new Error(message.error ?? "the load generator failed"));
  });
  child.once("exit", (code) => {
    pending?.reject(new Error(`the load generator exited with ${code}`));
    pending = undefined;
  });
  return {
    pid: child.pid!,
    run<J, R>(job: J, onMeasuring: () => void): Promise<R> {
      if (pending !== undefined) throw new Error("the load generator runs one job at a time");
      return new Promise<R>((resolve, reject) => {
        pending = { resolve: resolve as (value: unknown) => void, reject, onMeasuring };
        child.send({ type: "run", job });
      });
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.disconnect();
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
