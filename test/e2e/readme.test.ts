import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testDatabases } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import {
  buildDist,
  commandLines,
  docBlock,
  onServer,
  runWithToken,
  startExample,
  startGatewayExample,
} from "../support/doc-examples.js";
import { useServer } from "../support/server.js";

beforeAll(buildDist, 120_000);

describe("the README's examples, run as written against a running server", () => {
  const [sqlite] = testDatabases();
  const server = useServer(sqlite!);
  const runLine = async (line: string) => runWithToken(onServer(line, server().baseUrl), server().app.config.dataDir);

  it("curl: POST answers 201 with Location, then both lists show the definition", async () => {
    const lines = [
      ...commandLines(docBlock("README.md", "export TOKEN=")),
      ...commandLines(docBlock("README.md", "curl -s -F")),
    ].filter((line) => line.startsWith("curl "));
    expect(lines).toHaveLength(4);
    const [post, list, contractList, multipart] = lines as [string, string, string, string];
    const created = await runLine(post);
    expect(created).toMatch(/^HTTP\/1\.1 201/);
    const location = /^location: (\S+)/im.exec(created)?.[1];
    expect(location).toMatch(/^\/api\/asor\/v1\/default\/agentDefinition\/[0-9a-f]{32}$/);
    for (const command of [list, contractList]) {
      const body = JSON.parse(await runLine(command));
      expect(body.data.map((d: { name: string }) => d.name)).toContain("Hello Agent");
    }
    // The multipart form: a new version of the same agent.
    const second = JSON.parse(await runLine(multipart));
    expect(second).toMatchObject({ name: "Hello Agent", version: "1.1.0" });
    expect(second.reference_id).toBe(JSON.parse(created.slice(created.indexOf("{"))).reference_id);
  });

  it("buf curl: lists over gRPC", async () => {
    const [line, ...more] = commandLines(docBlock("README.md", "npm run -s buf -- curl --schema"));
    expect(more).toEqual([]);
    const body = JSON.parse(await runLine(line!));
    expect(body.total).toBeGreaterThanOrEqual(0);
  });
});

describe("the README's quick start", () => {
  /** What the block runs besides its marked `npm ci`, `npm test` and `npm run test:quick` (the comment before it). */
  const starts = () =>
    commandLines(docBlock("README.md", "npm ci && npm start"))
      .flatMap((line) => line.replace(/#.*$/, "").split("&&"))
      .map((command) => command.trim())
      .filter((command) => !["npm ci", "npm test", "npm run test:quick"].includes(command));
  let dataDir = "";
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "asor-quick-start-"));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it("runs `npm start` and `npm run start:deno` and nothing else", () => {
    expect(starts()).toEqual(["npm start", "npm run start:deno"]);
  });

  it.each(["npm start", "npm run start:deno"])(
    "%s serves on the port it is given, the catalog too, and stops on SIGTERM",
    async (command) => {
      expect(starts()).toContain(command);
      const env = { PORT: "0", DATA_DIR: dataDir, DATABASE_URL: "", LOG_LEVEL: "info" };
      const started = startExample(["bash", "-c", command], env);
      try {
        const [, url] = await started.line(/"message":"agent definition registry listening".*"url":"([^"]+)"/);
        const health = await fetch(new URL("/healthz", url));
        expect(health.status).toBe(200);
        expect(await health.json()).toEqual({ status: "ok" });
        // The catalog, built by the start itself when dist/ is stale, as the quick start says.
        const catalog = await fetch(new URL("/ui/", url));
        expect(catalog.status).toBe(200);
        expect(await catalog.text()).toMatch(/<title>Agent catalog<\/title>/);
      } finally {
        await started.stop();
      }
      expect(started.output()).toContain('"message":"shut down"');
    },
    180_000,
  );
});

describe("the README's express app, run as gateway.mjs against the package's built ./express export", () => {
  it("serves the registry and the host's route, and exits 0 after SIGTERM", async () => {
    const gateway = await startGatewayExample(docBlock("README.md", "// gateway.mjs"));
    let exited: number | string | null = "not stopped";
    try {
      const status = await fetch(`${gateway.baseUrl}/status`);
      expect(await status.text()).toBe("ok");
      // The catalog's pages are the registry's paths too.
      expect((await fetch(`${gateway.baseUrl}/ui/`)).headers.get("content-security-policy")).toContain(
        "frame-ancestors",
      );
      const created = await fetch(`${gateway.baseUrl}/asor/v1/agentDefinition`, {
        method: "POST",
        headers: { authorization: gateway.authorization, "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition({ name: "Gateway Agent" })),
      });
      expect(created.status).toBe(201);
      const list = await fetch(`${gateway.baseUrl}/asor/v1/agentDefinition`, {
        headers: { authorization: gateway.authorization },
      });
      expect((await list.json()).data.map((d: { name: string }) => d.name)).toEqual(["Gateway Agent"]);
    } finally {
      exited = await gateway.stop();
    }
    expect(exited).toBe(0);
  });
});
