/**
 * The code blocks of README.md and docs/*.md, for the tests that run them as written (test/e2e/readme.test.ts,
 * test/e2e/docs.test.ts). A block of code (sh, js, ts, or no language) is either run by one of those tests, listed
 * in RUN_BLOCKS below, or marked in the markdown by an HTML comment on the line before it:
 * `<!-- not run: why -->`. Data and pictures (json, text) are neither.
 */

import { execFile, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { parseConfig } from "../../src/config.js";
import { localBearer } from "./server.js";

const run = promisify(execFile);

/** The markdown files whose examples must run: the README and every page of docs/. */
export const DOC_FILES: readonly string[] = [
  "README.md",
  ...readdirSync("docs")
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/${name}`),
];

/** Block languages that are not code to run: data and pictures. */
const NOT_CODE = new Set(["json", "text"]);

/** One fenced block of a markdown file. */
export interface DocBlock {
  readonly file: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  /** The fence's language ("" when it names none). */
  readonly lang: string;
  readonly text: string;
  /** The reason of a `<!-- not run: ... -->` comment on the line before the fence. */
  readonly notRun?: string;
}

/** The fenced blocks of `file`. */
export function docBlocks(file: string): DocBlock[] {
  const lines = readFileSync(file, "utf8").split("\n");
  const blocks: DocBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (open === null) continue;
    const end = lines.indexOf("```", i + 1);
    if (end < 0) throw new Error(`${file}:${i + 1}: a code block that is never closed`);
    const notRun = /^<!-- not run: (.+) -->$/.exec(lines[i - 1] ?? "")?.[1];
    const text = lines.slice(i + 1, end).join("\n");
    blocks.push({ file, line: i + 1, lang: open[1]!, text, ...(notRun === undefined ? {} : { notRun }) });
    i = end;
  }
  return blocks;
}

/** Whether `block` is code, which must be run or marked. */
export function isCode(block: DocBlock): boolean {
  return !NOT_CODE.has(block.lang);
}

/**
 * The blocks the doc tests run, by file, each named by the start of its first line, with the test that runs it.
 * A test takes its block with `docBlock`, which only knows these.
 */
export const RUN_BLOCKS: Readonly<Record<string, readonly { starts: string; test: string }[]>> = {
  "README.md": [
    { starts: "npm ci && npm start", test: "test/e2e/readme.test.ts" },
    { starts: "export TOKEN=", test: "test/e2e/readme.test.ts" },
    { starts: "curl -s -F", test: "test/e2e/readme.test.ts" },
    { starts: "npm run -s buf -- curl --schema", test: "test/e2e/readme.test.ts" },
    { starts: "// gateway.mjs", test: "test/e2e/readme.test.ts" },
    { starts: "npm run -s asor -- validate examples/", test: "test/e2e/cli-docs.test.ts" },
  ],
  "docs/api.md": [
    { starts: "npm run admin -- tenant create", test: "test/e2e/docs.test.ts" },
    { starts: "npm run admin -- tenant get acme", test: "test/e2e/docs.test.ts" },
    {
      starts: "npm run -s buf -- curl --protocol grpc --http2-prior-knowledge --list-methods",
      test: "test/e2e/docs.test.ts",
    },
    { starts: "npx redocly lint", test: "test/e2e/docs.test.ts" },
    { starts: "// verify-card.mjs", test: "test/e2e/docs.test.ts" },
  ],
  "docs/operations.md": [{ starts: "// gateway.mjs", test: "test/e2e/docs.test.ts" }],
  "docs/mcp.md": [{ starts: "curl -s http://127.0.0.1:8080/mcp", test: "test/e2e/docs.test.ts" }],
  "docs/cli.md": [
    { starts: "export ASOR_URL=", test: "test/e2e/cli-docs.test.ts" },
    { starts: "npm run -s asor -- export -o", test: "test/e2e/cli-docs.test.ts" },
  ],
};

/** The block of `file` that starts with `starts` (one of RUN_BLOCKS). */
export function docBlock(file: string, starts: string): DocBlock {
  if (!RUN_BLOCKS[file]?.some((b) => b.starts === starts)) {
    throw new Error(`${file}: "${starts}" is not in RUN_BLOCKS (test/support/doc-examples.ts)`);
  }
  const found = docBlocks(file).filter((b) => b.text.startsWith(starts));
  if (found.length !== 1) throw new Error(`${file}: ${found.length} blocks start with "${starts}", not 1`);
  return found[0]!;
}

/** The command lines of `block`: without blank lines and comment lines. */
export function commandLines(block: DocBlock): string[] {
  return block.text.split("\n").filter((line) => line.trim() !== "" && !line.trimStart().startsWith("#"));
}

/** `line` aimed at `baseUrl` instead of the documented http://127.0.0.1:8080. */
export function onServer(line: string, baseUrl: string): string {
  return line.replaceAll("http://127.0.0.1:8080", baseUrl);
}

/** The README's `export TOKEN=...` line: the docs' later `$TOKEN`s are its token. */
export function tokenLine(): string {
  const line = commandLines(docBlock("README.md", "export TOKEN=")).find((l) => l.startsWith("export TOKEN="));
  if (line === undefined) throw new Error("README.md: no `export TOKEN=` line");
  return line;
}

/**
 * Runs shell `script` with bash at the repository's root, after the README's token line; `dataDir` is the
 * DATA_DIR of the server the token is for (its local issuer signs it). Resolves with its stdout; rejects on a
 * non-zero exit.
 */
export async function runWithToken(script: string, dataDir: string, env: Record<string, string> = {}) {
  const all = { ...process.env, DATA_DIR: dataDir, ...env };
  return (await run("bash", ["-c", `set -e\n${tokenLine()}\n${script}`], { env: all })).stdout;
}

/** A process started from a doc's example, with what it wrote to stdout so far. */
export interface ExampleProcess {
  readonly pid: number;
  /** Resolves with the first stdout line `match` finds something in, rejects when the process exits before. */
  line(match: RegExp): Promise<RegExpExecArray>;
  /** SIGTERM to its process group; resolves with the exit code (or signal) of its first process once all exited. */
  stop(): Promise<number | string | null>;
  output(): string;
}

/** Starts `command` (argv) detached, in its own process group, at `cwd` with `env` over the test's environment. */
export function startExample(command: readonly string[], env: Record<string, string>, cwd = "."): ExampleProcess {
  const child = spawn(command[0]!, command.slice(1), {
    cwd,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const out: string[] = [];
  child.stderr.on("data", (chunk: Buffer) => out.push(chunk.toString()));
  // "close": once every process of the group that holds its stdout and stderr has gone, not just the first.
  const exited = new Promise<number | string | null>((done) =>
    child.once("close", (code, signal) => done(code ?? signal)),
  );
  const lines = createInterface({ input: child.stdout });
  const seen: string[] = [];
  const waiting: { match: RegExp; done: (m: RegExpExecArray) => void }[] = [];
  lines.on("line", (line) => {
    seen.push(line);
    out.push(`${line}\n`);
    for (const w of [...waiting]) {
      const m = w.match.exec(line);
      if (m === null) continue;
      waiting.splice(waiting.indexOf(w), 1);
      w.done(m);
    }
  });
  return {
    pid: child.pid!,
    line: (match) =>
      new Promise((done, reject) => {
        for (const l of seen) {
          const m = match.exec(l);
          if (m !== null) return done(m);
        }
        waiting.push({ match, done });
        void exited.then((code) => reject(new Error(`exited (${code}) before ${match}: ${out.join("")}`)));
      }),
    stop: () => {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, "SIGTERM");
      return exited;
    },
    output: () => out.join(""),
  };
}

/**
 * A directory outside the repository that is set up as a project depending on this package (as
 * `agent-definition-registry`, whose exports point into dist/) and on express: an example file written there
 * imports what a team that installed the package imports. Build dist/ first (`node scripts/build.mjs --if-stale`).
 */
export async function consumerProject(): Promise<{ dir: string; cleanup(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "asor-doc-example-"));
  await mkdir(join(dir, "node_modules"));
  await symlink(resolve("."), join(dir, "node_modules", "agent-definition-registry"), "dir");
  await symlink(resolve("node_modules/express"), join(dir, "node_modules", "express"), "dir");
  await writeFile(join(dir, "package.json"), `${JSON.stringify({ type: "module", private: true })}\n`);
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

/** Builds dist/ when it is missing or stale, as `npm start` does. */
export async function buildDist(): Promise<void> {
  await run(process.execPath, ["scripts/build.mjs", "--if-stale"]);
}

/** A gateway example (README.md, docs/operations.md) running as `node gateway.mjs` in a consumer project. */
export interface GatewayExample {
  readonly baseUrl: string;
  /** `Bearer <token>` of the registry's local development issuer, for the tenant `default`. */
  readonly authorization: string;
  /** SIGTERM, then resolves with the exit code once the example has closed, and removes its project. */
  stop(): Promise<number | string | null>;
}

/**
 * Writes `block` as gateway.mjs into a consumerProject and runs it with node on a free port (PORT=0) and the
 * embedded database in the project's data/; resolves once it says where it listens. Build dist/ first.
 */
export async function startGatewayExample(block: DocBlock): Promise<GatewayExample> {
  const project = await consumerProject();
  await writeFile(join(project.dir, "gateway.mjs"), `${block.text}\n`);
  const dataDir = join(project.dir, "data");
  const env = { PORT: "0", DATA_DIR: dataDir, DATABASE_URL: "", LOG_LEVEL: "warn" };
  const gateway = startExample([process.execPath, "gateway.mjs"], env, project.dir);
  try {
    const [, baseUrl] = await gateway.line(/^gateway on (http:\/\/127\.0\.0\.1:\d+)$/);
    const bearer = await localBearer(parseConfig(env));
    return {
      baseUrl: baseUrl!,
      authorization: await bearer({ domains: ["Development", "Setup: Agents"] }),
      async stop() {
        const code = await gateway.stop();
        await project.cleanup();
        return code;
      },
    };
  } catch (error) {
    await gateway.stop();
    await project.cleanup();
    throw error;
  }
}
