/**
 * The service under Deno (`npm run start:deno`), as a real Deno process: the
 * same implementation over Connect, gRPC-Web and REST, the same local
 * development issuer key. Deno comes from node_modules; if it cannot start,
 * these tests fail.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { create, fromJson, toJson } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { status as grpcStatus, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { AgentDefinitionService, ListAgentDefinitionsRequestSchema } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { openLocalIssuer } from "../../src/auth/local-issuer.js";
import { parseConfig } from "../../src/config.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import { withAuthorization } from "../support/auth.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { exampleDefinition } from "../support/definitions.js";
import { type DenoServerProcess, runDenoToExit, spawnDenoServer } from "../support/deno-server-process.js";
import { createGrpcJsClient } from "../support/grpc-js-client.js";

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** A bearer token from the local development issuer whose key is in `dataDir` (read with the Node key store). */
async function bearer(dataDir: string): Promise<string> {
  const issuer = await openLocalIssuer(localIssuerKeyFile(dataDir), parseConfig({ DATA_DIR: dataDir }).auth);
  return `Bearer ${await issuer.issue({ tenant: "default", domains: ["Development", "Setup: Agents"] })}`;
}

describe("npm run start:deno", () => {
  it("refuses to start without DATABASE_URL, saying why, among every other bad setting", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "asor-deno-"));
    try {
      const { code, output } = await runDenoToExit({ DATA_DIR: dataDir, DATABASE_URL: "", LOG_LEVEL: "loud" });
      expect(code).toBe(1);
      expect(output).toContain("LOG_LEVEL must be one of");
      expect(output).toMatch(/DATABASE_URL is required under Deno: .*better-sqlite3.*Node-API/);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 120_000);

  it("passes deno check, and its typed view of the Deno global matches Deno's own types", async () => {
    const dir = await mkdtemp(join(tmpdir(), "asor-deno-check-"));
    try {
      const probe = join(dir, "deno-runtime-matches.ts");
      const runtimeModule = join(ROOT, "src/main/deno-runtime.ts");
      await writeFile(probe, `import type { DenoRuntime } from ${JSON.stringify(runtimeModule)};\nexport const runtime: DenoRuntime = Deno;\n`);
      const check = run("node", ["scripts/deno.mjs", "check", "--no-lock", "--node-modules-dir=manual", "--sloppy-imports", "src/main/deno.ts", probe], { cwd: ROOT });
      await expect(check).resolves.toBeDefined();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);

  const mariadb = testDatabases().find((db) => db.name === "mariadb")!;
  // Under Deno the service needs MySQL (see src/main/deno.ts); the MySQL suite's rules apply: skipped loudly here, never under CI.
  describe.skipIf(mariadb.skip)("serving MariaDB", () => {
    let database: FreshDatabase | undefined;
    let server: DenoServerProcess | undefined;
    let dataDir = "";
    let authorization = "";
    const env = () => ({ DATA_DIR: dataDir, DATABASE_URL: database!.databaseUrl! });

    beforeAll(async () => {
      database = await mariadb.create();
      dataDir = join(database.dataDir, "data"); // not there yet: the service makes it
      server = await spawnDenoServer(env());
      console.info(`deno start-up (spawn to listening, migrations included): ${server.startedInMs} ms`);
      authorization = await bearer(dataDir);
    }, 180_000);
    afterAll(async () => {
      await server?.stop();
      await database?.cleanup();
    });

    it("logs the Node entrypoint's start-up line, naming the surfaces it serves", () => {
      expect(server!.startLine).toMatchObject({
        level: "info",
        url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
        surfaces: expect.stringMatching(/gRPC-Web, Connect, REST/),
        storage: expect.stringMatching(/^MySQL at 127\.0\.0\.1:3306\/asor_test_/),
        defaultTenant: "default",
        auth: expect.stringContaining(join(dataDir, "dev-issuer.jwk")),
      });
    });

    it("makes the local issuer's key in DATA_DIR, readable by its owner only", async () => {
      expect((await stat(join(dataDir, "dev-issuer.jwk"))).mode & 0o777).toBe(0o600);
    });

    it("registers a definition over REST and reads it back over REST, Connect (HTTP/1.1 and 2) and gRPC-Web", async () => {
      const { baseUrl } = server!;
      const def = { ...exampleDefinition(), version: "deno-1" };
      const posted = await fetch(`${baseUrl}/api/asor/v1/default/agentDefinition`, {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify(def),
      });
      expect(posted.status).toBe(201);
      const created = await posted.json();
      expect(created.id).toMatch(/^[0-9a-f]{32}$/);

      const got = await fetch(new URL(posted.headers.get("location")!, baseUrl), { headers: { authorization } });
      expect(got.status).toBe(200);
      expect(await got.json()).toEqual(created);

      for (const transport of [
        createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors: [withAuthorization(authorization)] }),
        createGrpcWebTransport({ baseUrl, httpVersion: "1.1", interceptors: [withAuthorization(authorization)] }),
        // Deno.serve also speaks HTTP/2 cleartext (prior knowledge).
        createConnectTransport({ baseUrl, httpVersion: "2", interceptors: [withAuthorization(authorization)] }),
      ]) {
        const client = createClient(AgentDefinitionService, transport);
        const viaRpc = await client.getAgentDefinition({ id: created.id });
        expect(toJson(AgentDefinitionSchema, viaRpc)).toEqual(created);
        const list = await client.listAgentDefinitions({ limit: 100 });
        expect(list.data.map((d) => d.id)).toContain(created.id);
      }
    });

    it("registers over Connect and reads it back over REST; a bad POST gets the validation error body", async () => {
      const client = createClient(AgentDefinitionService, createConnectTransport({ baseUrl: server!.baseUrl, httpVersion: "1.1", interceptors: [withAuthorization(authorization)] }));
      const created = await client.upsertAgentDefinition({ agentCardAndTools: fromJson(AgentDefinitionSchema, { ...exampleDefinition(), version: "deno-connect" }) });
      const rest = await fetch(`${server!.baseUrl}/api/asor/v1/default/agentDefinition/${created.id}`, { headers: { authorization } });
      expect(await rest.json()).toEqual(toJson(AgentDefinitionSchema, created));
      const refused = await fetch(`${server!.baseUrl}/api/asor/v1/default/agentDefinition`, {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify({ ...exampleDefinition(), name: "" }),
      });
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({ errors: [{ code: "REQUIRED", path: "name" }] });
    });

    it("answers native gRPC with UNIMPLEMENTED and why (fetch has no trailers)", async () => {
      const grpc = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server!.port}`, authorization);
      try {
        const err = (await grpc.call("listAgentDefinitions", create(ListAgentDefinitionsRequestSchema, { limit: 5 })).catch((e: unknown) => e)) as ServiceError;
        expect(err.code).toBe(grpcStatus.UNIMPLEMENTED);
        expect(err.details).toMatch(/gRPC needs HTTP trailers/);
      } finally {
        grpc.close();
      }
    });

    it("answers a path outside the API with the 404 error body", async () => {
      const response = await fetch(`${server!.baseUrl}/nowhere`);
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ errors: [{ code: "NOT_FOUND" }] });
    });

    it("stops on SIGTERM, and restarted keeps its key: earlier tokens still work", async () => {
      const list = async () => {
        const response = await fetch(`${server!.baseUrl}/api/asor/v1/default/agentDefinition`, { headers: { authorization } });
        expect(response.status).toBe(200);
        return response.json();
      };
      const before = await list();
      const key = await readFile(join(dataDir, "dev-issuer.jwk"), "utf8");
      expect(await server!.stop()).toBe(0);
      expect(server!.output.join("\n")).toContain('"message":"shutting down","signal":"SIGTERM"');
      server = await spawnDenoServer(env());
      expect(await readFile(join(dataDir, "dev-issuer.jwk"), "utf8")).toBe(key);
      expect(await list()).toEqual(before);
    }, 180_000);
  });
});
