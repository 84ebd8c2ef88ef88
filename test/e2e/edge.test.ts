/**
 * The edge does each piece of work once, on every surface: one token
 * verification per request (counted at the authenticator), none for the tools
 * that need no token, and one parse of a JSON request body.
 */
import { create, fromJson, toJsonString } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  ListAgentDefinitionsRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import type { Authenticator } from "../../src/auth/authenticator.js";
import { withAuthorization } from "../support/auth.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { createGrpcJsClient } from "../support/grpc-js-client.js";
import { startServer, type TestServer } from "../support/server.js";

describe("the edge", () => {
  let database: FreshDatabase;
  let server: TestServer & { stop(): Promise<void> };
  /** Calls of the authenticator since the last reset. */
  let verifications = 0;
  const counting = (inner: Authenticator): Authenticator => ({
    description: inner.description,
    recheck: (authorization) => inner.recheck(authorization),
    authenticate: (authorization) => {
      verifications++;
      return inner.authenticate(authorization);
    },
  });

  beforeAll(async () => {
    database = await testDatabases()[0]!.create();
    server = await startServer(database, {}, undefined, { wrapAuthenticator: counting });
  });
  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
  });
  afterEach(() => {
    verifications = 0;
  });

  const rest = (path: string, init: RequestInit = {}) =>
    fetch(`${server.baseUrl}${path}`, {
      ...init,
      headers: { authorization: server.authorization, ...(init.headers as Record<string, string>) },
    });
  const transports = () => ({
    connect: createConnectTransport({
      baseUrl: server.baseUrl,
      httpVersion: "1.1",
      interceptors: [withAuthorization(server.authorization)],
    }),
    "connect over HTTP/2": createConnectTransport({
      baseUrl: server.baseUrl,
      httpVersion: "2",
      interceptors: [withAuthorization(server.authorization)],
    }),
    "gRPC-Web": createGrpcWebTransport({
      baseUrl: server.baseUrl,
      httpVersion: "1.1",
      interceptors: [withAuthorization(server.authorization)],
    }),
    gRPC: createGrpcTransport({ baseUrl: server.baseUrl, interceptors: [withAuthorization(server.authorization)] }),
  });

  it("verifies the token exactly once for each REST request, GET and POST", async () => {
    const posted = await rest("/asor/v1/agentDefinition", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(minimalDefinition({ version: "edge-rest" })),
    });
    expect(posted.status).toBe(201);
    expect(verifications).toBe(1);
    const { id } = await posted.json();
    expect((await rest(`/asor/v1/agentDefinition/${id}`)).status).toBe(200);
    expect((await rest("/api/asor/v1/default/agentDefinition?limit=3")).status).toBe(200);
    expect(verifications).toBe(3);
  });

  it("verifies the token exactly once for each RPC, over Connect, gRPC-Web and gRPC", async () => {
    for (const [name, transport] of Object.entries(transports())) {
      const client = createClient(AgentDefinitionService, transport);
      verifications = 0;
      const written = await client.upsertAgentDefinition({
        agentCardAndTools: fromJson(AgentDefinitionSchema, minimalDefinition({ version: `edge-${name}` }) as never),
      });
      expect(verifications, `${name} upsert`).toBe(1);
      await client.getAgentDefinition({ id: written.id });
      await client.listAgentDefinitions({ limit: 2 });
      expect(verifications, name).toBe(3);
    }
    const grpcJs = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server.port}`, server.authorization);
    try {
      verifications = 0;
      await grpcJs.call("listAgentDefinitions", create(ListAgentDefinitionsRequestSchema, {}));
      expect(verifications, "@grpc/grpc-js").toBe(1);
    } catch (err) {
      grpcJs.close();
      throw err;
    }
    grpcJs.close();
  });

  it("verifies a refused token once too, and never for health checks", async () => {
    expect(
      (
        await fetch(`${server.baseUrl}/asor/v1/agentDefinition`, {
          method: "POST",
          headers: { authorization: "Bearer nope", "content-type": "application/json" },
          body: "{}",
        })
      ).status,
    ).toBe(401);
    expect(verifications).toBe(1);
    const health = createClient(Health, transports().gRPC);
    await health.check({});
    expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200);
    expect(verifications).toBe(1);
  });

  describe("parses a JSON request body once", () => {
    const parse = JSON.parse;
    let parsesOfBody = 0;
    let body = "";
    beforeAll(() => {
      JSON.parse = ((text: string, reviver?: Parameters<typeof JSON.parse>[1]) => {
        if (text === body) parsesOfBody++;
        return parse(text, reviver);
      }) as typeof JSON.parse;
    });
    afterAll(() => {
      JSON.parse = parse;
    });

    // The body is sent in the canonical form protobuf-es writes, so a re-encoding and re-parse would be counted too.
    const canonical = (version: string) =>
      toJsonString(AgentDefinitionSchema, fromJson(AgentDefinitionSchema, minimalDefinition({ version }) as never));

    it("over REST", async () => {
      body = canonical("edge-parse-rest");
      parsesOfBody = 0;
      const posted = await rest("/asor/v1/agentDefinition", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      expect(posted.status).toBe(201);
      expect(parsesOfBody).toBe(1);
    });

    it("over Connect (JSON)", async () => {
      body = `{"agentCardAndTools":${canonical("edge-parse-connect")}}`;
      parsesOfBody = 0;
      const res = await fetch(`${server.baseUrl}/asor.v1.AgentDefinitionService/UpsertAgentDefinition`, {
        method: "POST",
        headers: { authorization: server.authorization, "content-type": "application/json" },
        body,
      });
      expect(res.status).toBe(200);
      expect(parsesOfBody).toBe(1);
    });
  });
});
