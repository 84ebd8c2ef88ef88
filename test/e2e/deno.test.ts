/**
 * `npm run start:deno`: the one entrypoint (src/main/node.ts) under Deno, as
 * a new user runs it. What every surface answers is tested under both
 * runtimes by the process-level suites (rest, rpc, limits, faults, shutdown,
 * concurrency: test/support/runtimes.ts); here is what is Deno's own: the
 * first start, every surface on one port, one SQLite file shared with Node,
 * and the permissions. Deno comes from node_modules; if it cannot start,
 * these tests fail.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { create, fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  GetAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus,
} from "../../gen/grpc/health/v1/health_pb.js";
import { withAuthorization } from "../support/auth.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { exampleDefinition, minimalDefinition } from "../support/definitions.js";
import { createGrpcJsClient } from "../support/grpc-js-client.js";
import { type ReachableServer, startServerProcess } from "../support/runtimes.js";
import type { ServerProcess } from "../support/server-process.js";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const sqlite = testDatabases()[0]!;

/** A REST answer as protobuf JSON (which leaves empty lists out), to compare with an RPC's answer. */
const asMessage = (json: JsonValue) => toJson(AgentDefinitionSchema, fromJson(AgentDefinitionSchema, json));

/** The JSON log lines a process writes to stdout, as they come. */
function logLines(child: ChildProcess): Record<string, unknown>[] {
  const lines: Record<string, unknown>[] = [];
  createInterface({ input: child.stdout! }).on("line", (line) => {
    try {
      lines.push(JSON.parse(line));
    } catch {
      // npm's own lines
    }
  });
  return lines;
}

describe("npm run start:deno", () => {
  it("starts as a new user starts it, right after npm ci: through npm, nothing cached, no DATABASE_URL, serving " +
    "the embedded database", async () => {
    const home = await mkdtemp(join(tmpdir(), "asor-deno-first-"));
    const dataDir = join(home, "data"); // not there yet: the service makes it
    // Its own process group, so the test can stop npm, its shell, the launcher and Deno together.
    const child = spawn("npm", ["run", "start:deno"], {
      cwd: ROOT,
      detached: true,
      // An empty DENO_DIR: Deno has compiled nothing yet, as on a fresh machine.
      env: {
        ...process.env,
        PORT: "0",
        DATA_DIR: dataDir,
        DATABASE_URL: "",
        DENO_DIR: join(home, "deno-cache"),
        LOG_LEVEL: "info",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk));
    const lines = logLines(child);
    try {
      const started = await new Promise<Record<string, unknown>>((resolve, reject) => {
        const timer = setInterval(() => {
          const line = lines.find((l) => l.message === "agent definition registry listening");
          if (line !== undefined) resolve(line);
          if (line !== undefined || child.exitCode !== null) clearInterval(timer);
          if (child.exitCode !== null) reject(new Error(`npm run start:deno exited with ${child.exitCode}: ${stderr}`));
        }, 50);
      });
      expect(started).toMatchObject({
        surfaces: "gRPC (HTTP/2), gRPC-Web, Connect, REST",
        storage: `embedded SQLite in ${dataDir}/registry.sqlite`,
        auth: expect.stringContaining(join(dataDir, "dev-issuer.jwk")),
      });
      expect((await stat(join(dataDir, "registry.sqlite"))).isFile()).toBe(true);
      expect((await stat(join(dataDir, "dev-issuer.jwk"))).mode & 0o777).toBe(0o600);
      const ready = await fetch(`http://127.0.0.1:${new URL(started.url as string).port}/readyz`);
      expect(ready.status).toBe(200);
    } finally {
      process.kill(-child.pid!, "SIGKILL");
      await rm(home, { recursive: true, force: true });
    }
  }, 180_000);

  describe("on sqlite", () => {
    let database: FreshDatabase;
    let server: ReachableServer & ServerProcess;

    beforeAll(async () => {
      database = await sqlite.create();
      server = await startServerProcess(database, {}, "deno");
    }, 180_000);
    afterAll(async () => {
      await server?.stop();
      await database?.cleanup();
    });

    it("serves gRPC (@grpc/grpc-js), Connect over HTTP/1.1 and HTTP/2, gRPC-Web and REST on one port", async () => {
      const { baseUrl, authorization, port } = server;
      const posted = await fetch(`${baseUrl}/api/asor/v1/default/agentDefinition`, {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify({ ...exampleDefinition(), version: "deno-surfaces" }),
      });
      expect(posted.status).toBe(201);
      const created = await posted.json();

      const grpc = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${port}`, authorization);
      try {
        const viaGrpc = await grpc.call(
          "getAgentDefinition",
          create(GetAgentDefinitionRequestSchema, { id: created.id }),
          AgentDefinitionSchema,
        );
        expect(toJson(AgentDefinitionSchema, viaGrpc)).toEqual(asMessage(created));
      } finally {
        grpc.close();
      }
      for (const transport of [
        createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors: [withAuthorization(authorization)] }),
        createConnectTransport({ baseUrl, httpVersion: "2", interceptors: [withAuthorization(authorization)] }),
        createGrpcWebTransport({ baseUrl, httpVersion: "1.1", interceptors: [withAuthorization(authorization)] }),
      ]) {
        const viaRpc = await createClient(AgentDefinitionService, transport).getAgentDefinition({ id: created.id });
        expect(toJson(AgentDefinitionSchema, viaRpc)).toEqual(asMessage(created));
      }
    });

    it(
      "serves reflection (buf curl without a schema), gRPC health, the probes, /metrics and /openapi.json without " +
        "a token",
      async () => {
        const { stdout } = await run(
          "node",
          [
            "scripts/buf.mjs",
            "curl",
            "--protocol",
            "grpc",
            "--http2-prior-knowledge",
            "--list-methods",
            server.baseUrl,
          ],
          { cwd: ROOT },
        );
        expect(stdout).toContain("asor.v1.AgentDefinitionService/GetAgentDefinition");
        const health = createClient(Health, createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "2" }));
        expect((await health.check(create(HealthCheckRequestSchema, {}))).status).toBe(
          HealthCheckResponse_ServingStatus.SERVING,
        );
        for (const path of ["/healthz", "/readyz", "/metrics", "/openapi.json"])
          expect((await fetch(`${server.baseUrl}${path}`)).status, path).toBe(200);
        expect(await (await fetch(`${server.baseUrl}/metrics`)).text()).toMatch(/^asor_requests_total\{/m);
      },
    );

    it(
      "runs with network, environment, read access to the code, the built catalog, package.json and the data " +
        "dir, write access to the data dir only",
      async () => {
        // The launcher (node scripts/deno.mjs) runs Deno as its one child: read Deno's own command line.
        const [denoPid] = (await readFile(`/proc/${server.child.pid}/task/${server.child.pid}/children`, "utf8"))
          .trim()
          .split(/\s+/);
        const argv = (await readFile(`/proc/${denoPid}/cmdline`, "utf8")).split("\0").filter((arg) => arg !== "");
        const flags = argv.filter((arg) => arg.startsWith("--allow") || arg === "-A");
        expect(flags).toEqual([
          "--allow-net",
          "--allow-env",
          `--allow-read=${["src", "gen", "node_modules", "dist/ui", "package.json"]
            .map((path) => join(ROOT, path))
            .join(",")},${database.dataDir}`,
          `--allow-write=${database.dataDir}`,
        ]);
        expect(argv.at(-1)).toBe(join(ROOT, "src/main/node.ts"));
      },
    );
  });

  it("shares one SQLite file with Node: each runtime reads what the other wrote, over REST and gRPC", async () => {
    const database = await sqlite.create();
    // Each a new agent, so neither write changes what the other answered.
    const post = async (s: ReachableServer, name: string) => {
      const res = await fetch(`${s.baseUrl}/api/asor/v1/default/agentDefinition`, {
        method: "POST",
        headers: { authorization: s.authorization, "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition({ name })),
      });
      expect(res.status).toBe(201);
      return res.json();
    };
    const get = async (s: ReachableServer, id: string) =>
      (
        await fetch(`${s.baseUrl}/api/asor/v1/default/agentDefinition/${id}`, {
          headers: { authorization: s.authorization },
        })
      ).json();
    try {
      const deno = await startServerProcess(database, {}, "deno");
      const byDeno = await post(deno, "Written By Deno");
      expect(await deno.stop()).toBe(0);

      const node = await startServerProcess(database, {}, "node");
      expect(await get(node, byDeno.id)).toEqual(byDeno);
      const byNode = await post(node, "Written By Node");
      expect(await node.stop()).toBe(0);

      const again = await startServerProcess(database, {}, "deno");
      try {
        expect(await get(again, byNode.id)).toEqual(byNode);
        expect(await get(again, byDeno.id)).toEqual(byDeno);
        const grpc = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${again.port}`, again.authorization);
        try {
          const viaGrpc = await grpc.call(
            "getAgentDefinition",
            create(GetAgentDefinitionRequestSchema, { id: byNode.id }),
            AgentDefinitionSchema,
          );
          expect(toJson(AgentDefinitionSchema, viaGrpc)).toEqual(asMessage(byNode));
        } finally {
          grpc.close();
        }
      } finally {
        await again.stop();
      }
    } finally {
      await database.cleanup();
    }
  }, 180_000);
});
