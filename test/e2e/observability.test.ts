import { create } from "@bufbuild/protobuf";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  AgentDefinitionService,
  GetAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import type { Logger } from "../../src/logger.js";
import { withAuthorization } from "../support/auth.js";
import { type FreshDatabase, forEachDatabase } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { createGrpcJsClient } from "../support/grpc-js-client.js";
import { startServer, type TestServer } from "../support/server.js";

/** A logger that keeps each JSON line it would have written. */
function capturingLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const write =
    (level: string) =>
    (message: string, fields: Record<string, unknown> = {}) =>
      void lines.push(JSON.stringify({ level, message, ...fields }));
  return { lines, info: write("info"), warn: write("warn"), error: write("error") };
}

/** A header value no log line may contain. */
const SECRET_HEADER_VALUE = "do-not-log-this-value";

forEachDatabase((db) => {
  let database: FreshDatabase;
  let server: TestServer & { stop(): Promise<void> };
  const logger = capturingLogger();

  beforeAll(async () => {
    database = await db.create();
    server = await startServer(database, {}, logger);
  });
  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
  });

  /** The request lines with this request id, once the one expected has been written (after the answer). */
  const linesOf = async (requestId: string): Promise<Record<string, unknown>[]> => {
    const find = () =>
      logger.lines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((e) => e.message === "request" && e.requestId === requestId);
    await vi.waitFor(() => expect(find().length).toBeGreaterThan(0));
    return find();
  };

  const token = () => server.authorization.replace(/^Bearer /, "");

  describe("the access log", () => {
    it("writes one line for a REST request, with the RPC it ran, its tenant and its request id", async () => {
      const res = await fetch(`${server.baseUrl}/api/asor/v1/default/agentDefinition?limit=5`, {
        headers: { authorization: server.authorization, "x-request-id": "rest-1", "user-agent": SECRET_HEADER_VALUE },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-request-id")).toBe("rest-1");
      const lines = await linesOf("rest-1");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        level: "info",
        protocol: "rest",
        method: "GET",
        path: "/api/asor/v1/default/agentDefinition",
        rpc: "asor.v1.AgentDefinitionService/ListAgentDefinitions",
        status: 200,
        code: "ok",
        tenant: "default",
      });
      expect(lines[0]!.durationMs).toEqual(expect.any(Number));
    });

    it("writes one line for a REST POST that fails validation before any RPC runs", async () => {
      const res = await fetch(`${server.baseUrl}/asor/v1/agentDefinition`, {
        method: "POST",
        headers: {
          authorization: server.authorization,
          "content-type": "application/json",
          "x-request-id": "rest-invalid",
        },
        body: JSON.stringify(minimalDefinition({ name: "" })),
      });
      expect(res.status).toBe(400);
      const lines = await linesOf("rest-invalid");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        protocol: "rest",
        method: "POST",
        path: "/asor/v1/agentDefinition",
        rpc: "asor.v1.AgentDefinitionService/UpsertAgentDefinition",
        status: 400,
        code: "invalid_argument",
      });
    });

    it("writes one line for a gRPC request, with the RPC code", async () => {
      const client = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server.port}`);
      const metadata = new grpc.Metadata();
      metadata.set("authorization", server.authorization);
      metadata.set("x-request-id", "grpc-1");
      metadata.set("x-custom", SECRET_HEADER_VALUE);
      try {
        const err = await client
          .call(
            "getAgentDefinition",
            create(GetAgentDefinitionRequestSchema, { id: "f".repeat(32) }),
            undefined,
            metadata,
          )
          .catch((e: unknown) => e);
        expect((err as grpc.ServiceError).code).toBe(grpc.status.NOT_FOUND);
      } finally {
        client.close();
      }
      const lines = await linesOf("grpc-1");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        protocol: "grpc",
        method: "POST",
        rpc: "asor.v1.AgentDefinitionService/GetAgentDefinition",
        status: 200,
        code: "not_found",
        tenant: "default",
      });
      expect(lines[0]).not.toHaveProperty("path");
    });

    it("writes one line for a Connect request and one for a gRPC-Web request", async () => {
      const requestId =
        (id: string): Interceptor =>
        (next) =>
        (req) => {
          req.header.set("x-request-id", id);
          return next(req);
        };
      const connect = createClient(
        AgentDefinitionService,
        createConnectTransport({
          baseUrl: server.baseUrl,
          httpVersion: "1.1",
          interceptors: [withAuthorization(server.authorization), requestId("connect-1")],
        }),
      );
      await connect.listAgentDefinitions({ limit: 1 });
      const grpcWeb = createClient(
        AgentDefinitionService,
        createGrpcWebTransport({
          baseUrl: server.baseUrl,
          httpVersion: "1.1",
          interceptors: [withAuthorization(server.authorization), requestId("grpc-web-1")],
        }),
      );
      await grpcWeb.listAgentDefinitions({ limit: 1 });
      const [connectLine] = await linesOf("connect-1");
      expect(await linesOf("connect-1")).toHaveLength(1);
      expect(connectLine).toMatchObject({
        protocol: "connect",
        rpc: "asor.v1.AgentDefinitionService/ListAgentDefinitions",
        status: 200,
        code: "ok",
        tenant: "default",
      });
      expect(await linesOf("grpc-web-1")).toHaveLength(1);
      expect((await linesOf("grpc-web-1"))[0]).toMatchObject({ protocol: "grpc-web", code: "ok", tenant: "default" });
    });

    it("logs an unauthenticated RPC with its code and no tenant", async () => {
      const res = await fetch(`${server.baseUrl}/asor.v1.AgentDefinitionService/ListAgentDefinitions`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: "Bearer not-a-token",
          "x-request-id": "connect-unauthenticated",
        },
        body: "{}",
      });
      expect(res.status).toBe(401);
      const [line] = await linesOf("connect-unauthenticated");
      expect(line).toMatchObject({ protocol: "connect", status: 401, code: "unauthenticated" });
      expect(line).not.toHaveProperty("tenant");
    });

    it("replaces a request id that is not sane with a generated one, and echoes it", async () => {
      const res = await fetch(`${server.baseUrl}/healthz`, { headers: { "x-request-id": "two words\t<script>" } });
      const echoed = res.headers.get("x-request-id");
      expect(echoed).toMatch(/^[0-9a-f-]{36}$/);
      const lines = await linesOf(echoed!);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ protocol: "http", method: "GET", path: "/healthz", status: 200 });
      expect(logger.lines.join("\n")).not.toContain("<script>");
    });

    it("never writes a token or another header value, and one line per request id", () => {
      const all = logger.lines.join("\n");
      expect(all).not.toContain(token());
      expect(all).not.toContain("not-a-token");
      expect(all).not.toContain(SECRET_HEADER_VALUE);
      const ids = logger.lines
        .map((l) => JSON.parse(l))
        .filter((e) => e.message === "request")
        .map((e) => e.requestId);
      expect(new Set(ids).size).toBe(ids.length);
    });
  });

  describe("/metrics", () => {
    const scrape = async (): Promise<string> => {
      const res = await fetch(`${server.baseUrl}/metrics`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
      return res.text();
    };
    /** The value of the sample `name{labels}` in an exposition, 0 when absent. */
    const sample = (text: string, series: string): number => {
      const line = text.split("\n").find((l) => l.startsWith(`${series} `));
      return line === undefined ? 0 : Number(line.slice(series.length + 1));
    };

    it("counts requests by protocol, operation and code, and times them", async () => {
      const rest =
        'asor_requests_total{protocol="rest",' +
        'operation="asor.v1.AgentDefinitionService/ListAgentDefinitions",code="200"}';
      const grpcNotFound =
        'asor_requests_total{protocol="grpc",' +
        'operation="asor.v1.AgentDefinitionService/GetAgentDefinition",code="not_found"}';
      const latency =
        'asor_request_duration_seconds_count{protocol="rest",' +
        'operation="asor.v1.AgentDefinitionService/ListAgentDefinitions"}';
      const before = await scrape();
      await fetch(`${server.baseUrl}/api/asor/v1/default/agentDefinition`, {
        headers: { authorization: server.authorization, "x-request-id": "metrics-rest" },
      });
      await fetch(`${server.baseUrl}/api/asor/v1/default/agentDefinition`, {
        headers: { authorization: server.authorization, "x-request-id": "metrics-rest-2" },
      });
      const client = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server.port}`, server.authorization);
      await client
        .call("getAgentDefinition", create(GetAgentDefinitionRequestSchema, { id: "e".repeat(32) }))
        .catch(() => undefined);
      client.close();
      // The samples are taken when each answer's connection event fires; the log line says it happened.
      await linesOf("metrics-rest-2");
      await vi.waitFor(async () => expect(sample(await scrape(), grpcNotFound)).toBe(sample(before, grpcNotFound) + 1));
      const after = await scrape();
      expect(sample(after, rest)).toBe(sample(before, rest) + 2);
      expect(sample(after, latency)).toBe(sample(before, latency) + 2);
    });

    it("shows the database pool's use and Node's process metrics", async () => {
      const text = await scrape();
      expect(sample(text, "asor_db_pool_max_connections")).toBe(db.name === "sqlite" ? 1 : 10);
      for (const gauge of [
        "asor_db_pool_used_connections",
        "asor_db_pool_free_connections",
        "asor_db_pool_pending_acquires",
      ]) {
        expect(text).toMatch(new RegExp(`^${gauge} \\d+$`, "m"));
      }
      // Every cause of a write run again, from zero (the cluster tests count certification and node_failed).
      for (const cause of ["certification", "deadlock", "lock_wait_timeout", "duplicate_key", "busy", "node_failed"])
        expect(text).toMatch(new RegExp(`^asor_db_write_retries_total\\{cause="${cause}"\\} \\d+$`, "m"));
      expect(text).toMatch(/^process_cpu_user_seconds_total /m);
      expect(text).toMatch(/^nodejs_eventloop_lag_seconds /m);
    });

    it("counts the reads by id and by reference, and the statements that answered them", async () => {
      const created = await fetch(`${server.baseUrl}/api/asor/v1/default/agentDefinition`, {
        method: "POST",
        headers: { authorization: server.authorization, "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition({ name: "Counted Reads Agent" })),
      });
      expect(created.status).toBe(201);
      const { id, reference_id: referenceId } = (await created.json()) as { id: string; reference_id: string };
      const series = (metric: string, read: string) => `${metric}{read="${read}"}`;
      const counts = (text: string) =>
        Object.fromEntries(
          ["by_id", "by_reference"].flatMap((read) => [
            [`${read} reads`, sample(text, series("asor_db_keyed_reads_total", read))],
            [`${read} statements`, sample(text, series("asor_db_keyed_read_statements_total", read))],
          ]),
        );
      const before = counts(await scrape());
      // Twenty GETs of each at once: on MariaDB those asked while one is in flight share a statement.
      const get = async (key: string) => {
        const res = await fetch(`${server.baseUrl}/api/asor/v1/default/agentDefinition/${key}`, {
          headers: { authorization: server.authorization },
        });
        expect(res.status).toBe(200);
        await res.arrayBuffer();
      };
      await Promise.all(Array.from({ length: 20 }, () => [get(id), get(referenceId)]).flat());
      const after = counts(await scrape());
      expect(after["by_id reads"]).toBe(before["by_id reads"]! + 20);
      expect(after["by_reference reads"]).toBe(before["by_reference reads"]! + 20);
      for (const read of ["by_id", "by_reference"]) {
        const statements = after[`${read} statements`]! - before[`${read} statements`]!;
        expect(statements).toBeGreaterThanOrEqual(1);
        // SQLite reads one key a statement; MariaDB at most as many statements as reads.
        if (db.name === "sqlite") expect(statements).toBe(20);
        else expect(statements).toBeLessThanOrEqual(20);
      }
    });

    it("counts a pool connection as used while a request holds it", async () => {
      // A write transaction holds its connection; watch the gauge from inside one through the repository.
      let seen = -1;
      await server.app.repository.write("default", async () => {
        seen = sample(await scrape(), "asor_db_pool_used_connections");
      });
      expect(seen).toBeGreaterThanOrEqual(1);
      expect(server.app.repository.poolStats().used).toBe(0);
    });

    it("is refused for methods other than GET and HEAD", async () => {
      const res = await fetch(`${server.baseUrl}/metrics`, { method: "POST" });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("GET, HEAD");
    });
  });
});
