/**
 * Names and identifiers refuse control, bidi formatting and zero-width characters and surrounding white space
 * (src/domain/identifying-text.ts), on every surface that writes: REST POST and PUT, gRPC (@grpc/grpc-js),
 * Connect; rows stored before the rule still read.
 */
import { create, fromJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { status as grpcStatus, type ServiceError } from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  UpdateAgentDefinitionRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { withDerivedFields } from "../../src/domain/derived-fields.js";
import { newDefinitionId, upsertKey } from "../../src/domain/upsert.js";
import { withAuthorization } from "../support/auth.js";
import { forEachDatabase } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { createGrpcJsClient, grpcErrorDetails } from "../support/grpc-js-client.js";
import { useServer } from "../support/server.js";

const PATH = "/asor/v1/agentDefinition";

forEachDatabase((db) => {
  const server = useServer(db);
  const rest = async (method: string, path: string, body?: unknown, domains?: string[]) => {
    const authorization = await server().bearer(domains === undefined ? {} : { domains });
    const res = await fetch(`${server().baseUrl}${PATH}${path}`, {
      method,
      headers: { authorization, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: await res.json() };
  };

  describe("identifying text", () => {
    it("REST: a trailing space makes no new agent beside a deactivated one (the audit's `guarded `)", async () => {
      const guarded = await rest("POST", "", minimalDefinition({ name: "guarded" }), ["Development"]);
      expect(guarded.status).toBe(201);
      expect((await rest("PATCH", `/${guarded.body.id}/status`, { status: "DEACTIVATED" })).status).toBe(200);

      const spaced = await rest("POST", "", minimalDefinition({ name: "guarded " }), ["Development"]);
      expect(spaced.status).toBe(400);
      expect(spaced.body).toEqual({
        error: "name ends with white space (U+0020): names and identifiers may not begin or end with white space.",
        errors: [
          {
            code: "INVALID_CHARACTER",
            field: "name",
            path: "name",
            error: "name ends with white space (U+0020): names and identifiers may not begin or end with white space.",
          },
        ],
      });
      const listed = await rest("GET", "?limit=100&name=guarded%20");
      expect(listed.body.total).toBe(0);
    });

    it("REST: every refused member is listed with its path, on POST and on PUT", async () => {
      const bad = minimalDefinition({
        name: "Escaped \u001b[2J agent",
        version: "1.0\u202e",
        skills: [{ id: "s\u200b1", name: "Skill one", description: "Free text may hold \u0000 and \u202e" }],
      });
      const posted = await rest("POST", "", bad);
      expect(posted.status).toBe(400);
      expect(posted.body.errors.map((e: any) => [e.code, e.path])).toEqual([
        ["INVALID_CHARACTER", "name"],
        ["INVALID_CHARACTER", "version"],
        ["INVALID_CHARACTER", "skills[0].id"],
      ]);

      const created = await rest("POST", "", minimalDefinition({ name: "Put target" }));
      expect(created.status).toBe(201);
      const put = await rest("PUT", `/${created.body.id}`, {
        ...minimalDefinition({ name: "Put target" }),
        externalAgentID: "\u0000ext",
      });
      expect(put.status).toBe(400);
      expect(put.body.errors).toEqual([
        expect.objectContaining({ code: "INVALID_CHARACTER", path: "externalAgentID" }),
      ]);
    });

    it("gRPC (@grpc/grpc-js) and Connect: INVALID_ARGUMENT with the same issue as a detail", async () => {
      const def = fromJson(
        AgentDefinitionSchema,
        minimalDefinition({
          name: "gRPC names",
          hostConfig: [
            {
              skillId: "s1",
              executionMode: { id: "Mode=Ambient" },
              hostResources: [{ tool_name: "\u2066GET /workers\u2069", description: "Reads workers" }],
            },
          ],
        }),
      );
      const grpc = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, server().authorization);
      try {
        const err = (await grpc
          .call("upsertAgentDefinition", create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: def }))
          .then(
            () => undefined,
            (e: unknown) => e,
          )) as ServiceError | undefined;
        expect(err?.code).toBe(grpcStatus.INVALID_ARGUMENT);
        const [detail] = grpcErrorDetails(err as ServiceError);
        expect((detail as any)?.errors).toEqual([
          expect.objectContaining({
            code: "INVALID_CHARACTER",
            field: "tool_name",
            path: "hostConfig[0].hostResources[0].tool_name",
          }),
        ]);
      } finally {
        grpc.close();
      }

      const connect = createClient(
        AgentDefinitionService,
        createConnectTransport({
          baseUrl: server().baseUrl,
          httpVersion: "1.1",
          interceptors: [withAuthorization(server().authorization)],
        }),
      );
      const updated = await connect
        .updateAgentDefinition(
          create(UpdateAgentDefinitionRequestSchema, {
            id: "0123456789abcdef0123456789abcdef",
            agentCardAndTools: fromJson(AgentDefinitionSchema, minimalDefinition({ name: " leading" })),
          }),
        )
        .then(
          () => undefined,
          (e: unknown) => ConnectError.from(e),
        );
      expect(updated?.code).toBe(Code.InvalidArgument);
      expect(updated?.findDetails(ValidationErrorSchema)[0]?.errors.map((e) => [e.code, e.path])).toEqual([
        ["INVALID_CHARACTER", "name"],
      ]);
    });

    it("a row stored before the rule still reads, by id and in lists", async () => {
      const def = fromJson(AgentDefinitionSchema, minimalDefinition({ name: "Stored before\u0000 ", version: "old" }));
      const key = upsertKey(def);
      const stored = await server().app.repository.write("default", async (tx) => {
        const agent = await tx.createAgent(key.providerId, key.name);
        return tx.insert(key, agent, withDerivedFields(def, newDefinitionId(), agent.referenceId));
      });
      const read = await rest("GET", `/${stored.id}`);
      expect(read.status).toBe(200);
      expect(read.body.name).toBe("Stored before\u0000 ");
      const listed = await rest("GET", `?limit=100&version=old`);
      expect(listed.body.data.map((d: any) => d.name)).toEqual(["Stored before\u0000 "]);
    });
  });
});
