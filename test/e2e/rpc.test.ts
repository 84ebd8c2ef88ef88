import { create, fromJson, type Message, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { status as grpcStatus, type ServiceError } from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  GetAgentDefinitionRequestSchema,
  ListAgentDefinitionsRequestSchema,
  ListAgentDefinitionsResponseSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { withAuthorization } from "../support/auth.js";
import { exampleDefinition, minimalDefinition, withoutReadOnly } from "../support/definitions.js";
import { createGrpcJsClient, grpcErrorDetails } from "../support/grpc-js-client.js";
import { forEachRuntimeAndDatabase, useServerUnder } from "../support/runtimes.js";

/** A bad definition with problems of every layer: JSON-valid but breaking proto rules and cross-field rules. */
function badDefinition() {
  return minimalDefinition({
    name: "",
    url: "relative/path",
    provider: { id: "nope" },
    skills: [
      { id: "s1", name: "a", description: "a", tags: [{ tag: "" }] },
      { id: "s1", name: "", description: "b" },
    ],
    hostConfig: [{ skillId: "ghost", executionMode: { id: "Mode=Ambient" } }],
  });
}

const upsertRequest = (def: Record<string, unknown>, tenant = "default") =>
  create(UpsertAgentDefinitionRequestSchema, {
    tenant,
    agentCardAndTools: fromJson(AgentDefinitionSchema, def as never),
  });

forEachRuntimeAndDatabase((db, runtime) => {
  const server = useServerUnder(runtime, db);

  const connectTransports: [string, () => Transport][] = [
    [
      "Connect",
      () =>
        createConnectTransport({
          baseUrl: server().baseUrl,
          httpVersion: "1.1",
          interceptors: [withAuthorization(server().authorization)],
        }),
    ],
    [
      "gRPC-Web",
      () =>
        createGrpcWebTransport({
          baseUrl: server().baseUrl,
          httpVersion: "1.1",
          interceptors: [withAuthorization(server().authorization)],
        }),
    ],
    [
      "Connect over HTTP/2",
      () =>
        createConnectTransport({
          baseUrl: server().baseUrl,
          httpVersion: "2",
          interceptors: [withAuthorization(server().authorization)],
        }),
    ],
  ];

  describe.each(connectTransports)("over %s", (name, transport) => {
    it("upserts, gets and lists", async () => {
      const client = createClient(AgentDefinitionService, transport());
      const def = { ...exampleDefinition(), version: `rpc-${name}` };
      const created = await client.upsertAgentDefinition(upsertRequest(def));
      expect(created.id).toMatch(/^[0-9a-f]{32}$/);
      expect(withoutReadOnly(toJson(AgentDefinitionSchema, created) as Record<string, unknown>)).toEqual(def);
      const got = await client.getAgentDefinition({ tenant: "default", id: created.id });
      expect(got).toEqual(created);
      const viaContract = await client.getAgentDefinition({ id: created.id });
      expect(viaContract).toEqual(created);
      const list = await client.listAgentDefinitions({ limit: 100 });
      expect(list.data.map((d) => d.id)).toContain(created.id);
      expect(list.total).toBe(list.data.length);
    });

    it("answers NotFound with the validation error as a detail", async () => {
      const client = createClient(AgentDefinitionService, transport());
      const err = await client.getAgentDefinition({ id: "f".repeat(32) }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.NotFound);
      const [detail] = (err as ConnectError).findDetails(ValidationErrorSchema);
      expect(detail?.errors[0]).toMatchObject({ code: "NOT_FOUND", path: "id" });
    });
  });

  describe("over gRPC with @grpc/grpc-js", () => {
    const grpc = () => createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, server().authorization);

    it("upserts, gets and lists", async () => {
      const client = grpc();
      try {
        const def = { ...exampleDefinition(), version: "rpc-grpc-js" };
        const created = await client.call("upsertAgentDefinition", upsertRequest(def), AgentDefinitionSchema);
        expect(withoutReadOnly(toJson(AgentDefinitionSchema, created) as Record<string, unknown>)).toEqual(def);
        const got = await client.call(
          "getAgentDefinition",
          create(GetAgentDefinitionRequestSchema, { tenant: "default", id: created.id }),
          AgentDefinitionSchema,
        );
        expect(toJson(AgentDefinitionSchema, got)).toEqual(toJson(AgentDefinitionSchema, created));
        const list = await client.call(
          "listAgentDefinitions",
          create(ListAgentDefinitionsRequestSchema, { limit: 100 }),
          ListAgentDefinitionsResponseSchema,
        );
        expect(list.data.map((d) => d.id)).toContain(created.id);
      } finally {
        client.close();
      }
    });

    it("answers NOT_FOUND for an unknown tenant, with the validation error as a detail", async () => {
      const client = createGrpcJsClient(
        AgentDefinitionService,
        `127.0.0.1:${server().port}`,
        await server().bearer({ tenant: "ghost" }),
      );
      try {
        const err = (await client
          .call("listAgentDefinitions", create(ListAgentDefinitionsRequestSchema, { tenant: "ghost" }))
          .catch((e: unknown) => e)) as ServiceError;
        expect(err.code).toBe(grpcStatus.NOT_FOUND);
        const [detail] = grpcErrorDetails(err);
        expect(detail && toJson(ValidationErrorSchema, detail as never)).toMatchObject({
          errors: [{ code: "TENANT_NOT_FOUND", field: "tenant" }],
        });
      } finally {
        client.close();
      }
    });

    it("rejects fields a binary client sends that the contract does not know", async () => {
      const client = grpc();
      try {
        const request = upsertRequest(minimalDefinition({ name: "Unknown field agent" }));
        request.agentCardAndTools!.$unknown = [{ no: 99, wireType: 2, data: new Uint8Array([2, 104, 105]) }];
        const err = (await client.call("upsertAgentDefinition", request).catch((e: unknown) => e)) as ServiceError;
        expect(err.code).toBe(grpcStatus.INVALID_ARGUMENT);
        const [detail] = grpcErrorDetails(err) as Message[];
        expect(toJson(ValidationErrorSchema, detail as never)).toMatchObject({
          errors: [{ code: "UNKNOWN_FIELD", path: "#99" }],
        });
      } finally {
        client.close();
      }
    });
  });

  it("gives the same validation result over REST, Connect, gRPC-Web and gRPC", async () => {
    const def = badDefinition();
    const rest = await fetch(`${server().baseUrl}/api/asor/v1/default/agentDefinition`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: server().authorization },
      body: JSON.stringify(def),
    });
    expect(rest.status).toBe(400);
    const expected = await rest.json();
    expect(expected.errors.length).toBe(7);

    for (const [, transport] of connectTransports) {
      const err = await createClient(AgentDefinitionService, transport())
        .upsertAgentDefinition(upsertRequest(def))
        .catch((e: unknown) => e);
      expect((err as ConnectError).code).toBe(Code.InvalidArgument);
      const [detail] = (err as ConnectError).findDetails(ValidationErrorSchema);
      expect(toJson(ValidationErrorSchema, detail!)).toEqual(expected);
    }

    const client = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, server().authorization);
    try {
      const err = (await client
        .call("upsertAgentDefinition", upsertRequest(def))
        .catch((e: unknown) => e)) as ServiceError;
      expect(err.code).toBe(grpcStatus.INVALID_ARGUMENT);
      const [detail] = grpcErrorDetails(err);
      expect(toJson(ValidationErrorSchema, detail as never)).toEqual(expected);
    } finally {
      client.close();
    }
  });
});
