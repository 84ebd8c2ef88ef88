// The local development issuer (no AUTH_ISSUER) as real processes see it:
// served on a loopback HOST with a warning at start-up (the quick start keeps
// working with no settings), refused on any other HOST unless
// AUTH_ALLOW_DEV_ISSUER=true says so. And its sign-in (`POST /ui/dev-token`), under Node and Deno: served only to a
// request made on this machine (a loopback socket at both ends) to a loopback authority, whatever HOST says.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { openLocalIssuer } from "../../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import {
  DEV_TOKEN_BODY,
  devTokenHttp1,
  devTokenHttp2,
  errorCode,
  nonLoopbackIPv4,
  type RawAnswer,
} from "../support/dev-sign-in.js";
import { AUDIENCE, startOidcProvider, type TestIssuer } from "../support/oidc-provider.js";
import { RUNTIMES, type Runtime, type ServerProcess, spawnServer } from "../support/server-process.js";

const dirs: string[] = [];
const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});
async function dataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "asor-dev-issuer-"));
  dirs.push(dir);
  return dir;
}

/** The environment of a fresh start: no AUTH_* or HOST inherited from the test's own environment. */
function env(settings: Record<string, string>): Record<string, string> {
  const cleared = Object.fromEntries(
    Object.keys(process.env)
      .filter((k) => k.startsWith("AUTH_") || k === "HOST" || k === "DATABASE_URL")
      .map((k) => [k, ""]),
  );
  return { ...cleared, ...settings };
}

async function start(settings: Record<string, string>, runtime: Runtime = "node"): Promise<ServerProcess> {
  const server = await spawnServer(env(settings), runtime);
  running.push(server);
  return server;
}

/** The JSON lines a process wrote to stderr once it has closed it (the process has exited). */
async function stderrLines(server: ServerProcess): Promise<Record<string, unknown>[]> {
  const stream = server.child.stderr;
  if (stream !== null && !stream.closed) await new Promise((resolve) => stream.once("close", resolve));
  return server
    .stderr()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const DEV_WARNING = /local development issuer is on/;

describe("the local development issuer", () => {
  it("serves the quick start on loopback with no settings, warning at start-up", async () => {
    const dir = await dataDir();
    const server = await start({ DATA_DIR: dir });
    const issuer = await openLocalIssuer(localIssuerKeyFile(dir), parseAuthConfig({}).config);
    const token = await issuer.issue({ tenant: "default", domains: ["Development"] });
    const res = await fetch(`${server.baseUrl}/asor/v1/agentDefinition`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(200);
    await server.stop();
    const warnings = (await stderrLines(server)).filter(
      (line) => line.level === "warn" && DEV_WARNING.test(String(line.message)),
    );
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ host: "127.0.0.1" });
  });

  it("refuses to start on a HOST that is not loopback, naming AUTH_ISSUER and AUTH_ALLOW_DEV_ISSUER", async () => {
    const failure = await start({ DATA_DIR: await dataDir(), HOST: "0.0.0.0" }).catch((e: unknown) => e as Error);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toMatch(/exited with 1/);
    expect((failure as Error).message).toMatch(
      /HOST "0\.0\.0\.0" is not a loopback address and AUTH_ISSUER is unset: set AUTH_ISSUER/,
    );
    expect((failure as Error).message).toContain("AUTH_ALLOW_DEV_ISSUER=true");
  });

  it("serves it on such a HOST when AUTH_ALLOW_DEV_ISSUER=true, with the warning", async () => {
    const server = await start({ DATA_DIR: await dataDir(), HOST: "0.0.0.0", AUTH_ALLOW_DEV_ISSUER: "true" });
    await server.stop();
    const warnings = (await stderrLines(server)).filter(
      (line) => line.level === "warn" && DEV_WARNING.test(String(line.message)),
    );
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ host: "0.0.0.0" });
  });
});

describe("with an identity provider", () => {
  let issuer: TestIssuer;
  beforeAll(async () => {
    issuer = await startOidcProvider([]);
  });
  afterAll(() => issuer?.close());

  it("starts on a HOST that is not loopback, without the warning", async () => {
    const server = await start({
      DATA_DIR: await dataDir(),
      HOST: "0.0.0.0",
      AUTH_ISSUER: issuer.issuer,
      AUTH_ALLOW_HTTP_ISSUER: "true",
      AUTH_AUDIENCE: AUDIENCE,
    });
    await server.stop();
    expect((await stderrLines(server)).filter((line) => DEV_WARNING.test(String(line.message)))).toEqual([]);
  });
});

describe.each(RUNTIMES)("the development sign-in under %s", (runtime) => {
  const refused = (answer: RawAnswer) => {
    expect(answer.status).toBe(403);
    expect(errorCode(answer)).toBe("PERMISSION_DENIED");
  };
  /** A server on the default HOST (127.0.0.1), for the suite: the port its tests reach on 127.0.0.1. */
  let port: number;
  let server: ServerProcess | undefined;
  let dir: string | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "asor-dev-sign-in-"));
    server = await spawnServer(env({ DATA_DIR: dir }), runtime);
    port = server.port;
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it("answers a request sent to a loopback authority: Host over HTTP/1.1, :authority over HTTP/2", async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, "LOCALHOST", "127.1.2.3"])
      expect((await devTokenHttp1("127.0.0.1", port, [host])).status, host).toBe(200);
    // As a browser sends it: no host header.
    expect((await devTokenHttp2("127.0.0.1", port, { ":authority": `localhost:${port}` })).status).toBe(200);
    const both = { ":authority": `127.0.0.1:${port}`, host: `127.0.0.1:${port}` };
    expect((await devTokenHttp2("127.0.0.1", port, both)).status).toBe(200);
  });

  it("refuses an authority of which only a beginning is loopback", async () => {
    for (const host of ["[::1]evil.example", "[::1]:80evil.example", "127.0.0.1.evil.example", "localhost."])
      refused(await devTokenHttp1("127.0.0.1", port, [host]));
  });

  it("refuses an HTTP/2 request whose :authority is not loopback, though its host header is", async () => {
    refused(await devTokenHttp2("127.0.0.1", port, { ":authority": "attacker.example", host: `127.0.0.1:${port}` }));
  });

  it("refuses two Host lines, and a request a proxy says it forwarded", async () => {
    // Node keeps the first Host line, whichever a proxy before it read.
    refused(await devTokenHttp1("127.0.0.1", port, [`127.0.0.1:${port}`, "attacker.example"]));
    refused(await devTokenHttp1("127.0.0.1", port, [`127.0.0.1:${port}`], { "X-Forwarded-For": "192.0.2.99" }));
    refused(await devTokenHttp1("127.0.0.1", port, [`127.0.0.1:${port}`], { Forwarded: "for=192.0.2.99" }));
  });

  const address = nonLoopbackIPv4();
  const noAddress = address === undefined ? " (skipped: this machine has no IPv4 address that is not loopback)" : "";
  it.skipIf(address === undefined)(
    `refuses a request that arrived on an address that is not loopback, whatever Host says (HOST 0.0.0.0)${noAddress}`,
    async () => {
      const open = await start({ DATA_DIR: await dataDir(), HOST: "0.0.0.0", AUTH_ALLOW_DEV_ISSUER: "true" }, runtime);
      const loopback = `127.0.0.1:${open.port}`;
      refused(await devTokenHttp1(address as string, open.port, [loopback]));
      refused(await devTokenHttp2(address as string, open.port, { ":authority": loopback }));
      // The same server on its loopback address answers.
      expect((await devTokenHttp1("127.0.0.1", open.port, [loopback])).status).toBe(200);
      const token = await fetch(`${open.baseUrl}/ui/dev-token`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: DEV_TOKEN_BODY,
      });
      expect(token.status).toBe(200);
    },
  );
});
