/**
 * A start that cannot succeed says why in one line naming what to check, and exits 1 (issue 48, item 3): `npm
 * start`'s command as a child process, against a port taken by a real listener, a DATA_DIR that is a file, a
 * database port nothing listens on, a real MariaDB refusing the credentials, an identity provider that cannot
 * be reached.
 */
import { execFile } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startDenoCommand } from "../support/deno-server-process.js";
import { npmScriptCommand } from "../support/npm-script.js";

/** A port nothing listens on: one the system gave and took back. */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, "close");
  return port;
}

/** `npm start`'s (or `npm run start:deno`'s) command with `env`; resolves with its exit code, stderr and stdout. */
async function start(
  env: Record<string, string>,
  deno = false,
): Promise<{ code: number; stderr: string; stdout: string }> {
  const [node, ...args] = deno ? startDenoCommand() : await npmScriptCommand("start");
  return await new Promise((done) => {
    execFile(
      node,
      args,
      { env: { ...process.env, PORT: "0", HOST: "127.0.0.1", ...env }, timeout: 60_000 },
      (e, stdout, stderr) => done({ code: e === null ? 0 : typeof e.code === "number" ? e.code : -1, stderr, stdout }),
    );
  });
}

/** The lines of `stderr`. */
const lines = (stderr: string) => stderr.trim().split("\n");

describe("a start that fails", () => {
  let dir = "";
  let taken: Server;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "startup-"));
    taken = createServer().listen(0, "127.0.0.1");
    await once(taken, "listening");
  });
  afterAll(async () => {
    taken.close();
    await rm(dir, { recursive: true, force: true });
  });

  it.each([
    ["Node", false],
    ["Deno", true],
  ])("on a port in use (%s): one line naming the address and PORT, exit 1", async (_runtime, deno) => {
    const { port } = taken.address() as { port: number };
    const run = await start({ DATA_DIR: await mkdtemp(join(dir, "d")), PORT: String(port) }, deno);
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toEqual([
      `cannot listen on 127.0.0.1:${port}: the port is in use (EADDRINUSE); stop what listens there, or set PORT ` +
        "(and HOST) to another",
    ]);
  });

  it.each([
    ["Node", false],
    ["Deno", true],
  ])("on a DATA_DIR that is not a directory (%s): one line naming it, exit 1", async (_runtime, deno) => {
    const file = join(dir, "a-file");
    await writeFile(file, "");
    const run = await start({ DATA_DIR: file }, deno);
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toEqual([
      expect.stringMatching(new RegExp(`^DATA_DIR ${file} cannot be used \\(ENOTDIR`)),
    ]);
  });

  it("on an identity provider that cannot be reached: one line naming it, exit 1", async () => {
    const issuer = `http://127.0.0.1:${await closedPort()}/`;
    const run = await start({
      DATA_DIR: await mkdtemp(join(dir, "d")),
      AUTH_ISSUER: issuer,
      AUTH_ALLOW_HTTP_ISSUER: "true",
    });
    expect(run.code).toBe(1);
    expect(lines(run.stderr)).toEqual([expect.stringContaining(`OpenID discovery of ${issuer} failed`)]);
  });

  it("on a database nothing listens for: one line, its host and port and what to check; exit 1", async () => {
    const port = await closedPort();
    const run = await start({
      DATA_DIR: await mkdtemp(join(dir, "d")),
      DATABASE_URL: `mysql://root@127.0.0.1:${port}/x`,
    });
    expect(run.code).toBe(1);
    // Only the service's line, and nothing on stdout (the log's stream): knex's own warning of each failed
    // attempt, with a stack, went there by console.log.
    expect(run.stdout).toBe("");
    expect(lines(run.stderr)).toEqual([
      `the database cannot be reached (ECONNREFUSED): MySQL at 127.0.0.1:${port}/x; check that MariaDB or MySQL ` +
        "runs there and accepts connections, and DATABASE_URL's host and port",
    ]);
  });

  it.skipIf(inject("mysqlUrl") === null)(
    "on credentials the database refuses: the user and what to check; exit 1",
    async () => {
      const url = new URL(inject("mysqlUrl") ?? "mysql://127.0.0.1:3306");
      url.username = "no_such_user";
      url.password = "wrong";
      url.pathname = "/x";
      const run = await start({ DATA_DIR: await mkdtemp(join(dir, "d")), DATABASE_URL: url.href });
      expect(run.code).toBe(1);
      expect(lines(run.stderr)).toHaveLength(1);
      const last = lines(run.stderr).at(-1);
      expect(last).toMatch(/^the database refused the connection \(ER_ACCESS_DENIED\w*\): MySQL at .*'no_such_user'/);
      expect(last).toMatch(/check DATABASE_URL's user, password and database name$/);
      expect(run.stderr).not.toContain("wrong");
    },
  );
});
