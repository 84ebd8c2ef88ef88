/**
 * The same body gives the same issues on every surface (issue 23, item 5):
 * a body sent over REST (a definition POSTed or PUT, a status change PATCHed),
 * as the body field of its RPC over Connect JSON (UpsertAgentDefinition,
 * UpdateAgentDefinition, SetAgentDefinitionStatus), and (where the problem
 * survives binary encoding) over gRPC, is refused with the same codes, fields
 * and paths, relative to the body, and the same summary. One body check
 * (src/surfaces/encoding/body-check.ts) reads REST bodies and RPC JSON messages;
 * the service's own rules are given relative to the body by the operations (src/domain/body-field.ts). The one designed
 * difference is not asked here: Connect JSON also takes the proto names of
 * members (`external_agent_id`), as protobuf JSON does (docs/decisions.md).
 */
import { create, fromJson } from "@bufbuild/protobuf";
import type { ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  SetAgentDefinitionStatusRequestSchema,
  StatusChangeSchema,
  UpdateAgentDefinitionRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import type { ValidationError } from "../../gen/asor/v1/error_pb.js";
import { postConnectJson, UPSERT_RPC } from "../support/connect-json.js";
import { forEachDatabase } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { createGrpcJsClient, grpcErrorDetails } from "../support/grpc-js-client.js";
import { useServer } from "../support/server.js";

const PATH = "/api/asor/v1/default/agentDefinition";
const UPDATE_RPC = "asor.v1.AgentDefinitionService/UpdateAgentDefinition";
const SET_STATUS_RPC = "asor.v1.AgentDefinitionService/SetAgentDefinitionStatus";

/** What a refusal says, surface-independently: the summary and each item's code, field and path. */
interface Refusal {
  readonly error: string;
  readonly items: ReadonlyArray<{ code: string; field?: string | undefined; path?: string | undefined }>;
}

const items = (errors: ReadonlyArray<{ code: string; field?: string | undefined; path?: string | undefined }>) =>
  errors.map(({ code, field, path }) => ({ code, ...(field ? { field } : {}), ...(path ? { path } : {}) }));

/**
 * Broken bodies, as JSON text. `binary`: the problem survives binary encoding
 * (the service's rules), so gRPC is asked too. `syntax`: the summary quotes
 * the parser, whose position differs once the body is inside a request; only
 * the items are compared.
 */
interface Case {
  readonly name: string;
  readonly body: string;
  readonly binary?: boolean;
  readonly syntax?: boolean;
}

/** Broken definitions (UpsertAgentDefinition's body, and UpdateAgentDefinition's). */
const cases: Case[] = [
  {
    name: "an unknown member, deep",
    body: JSON.stringify(minimalDefinition({ skills: [{ id: "s1", name: "S", description: "D", colour: "red" }] })),
  },
  {
    name: "wrongly typed members",
    body: JSON.stringify(minimalDefinition({ version: 3, skills: "none", capabilities: { streaming: "yes" } })),
  },
  {
    name: "a member given twice",
    body: JSON.stringify(minimalDefinition()).replace('"name":', '"name":"Twice","name":'),
  },
  {
    name: "a missing required member and a bad reference id",
    body: JSON.stringify(minimalDefinition({ url: undefined, provider: { id: "Acme" } })),
    binary: true,
  },
  {
    name: "a hostConfig naming no skill",
    body: JSON.stringify(
      minimalDefinition({ hostConfig: [{ skillId: "nope", executionMode: { id: "Mode=Ambient" } }] }),
    ),
    binary: true,
  },
  {
    name: "a media type over 80 characters",
    body: JSON.stringify(minimalDefinition({ defaultInputModes: [{ type: "x".repeat(81) }] })),
    binary: true,
  },
  { name: "text that is not JSON", body: '{"name": "Unclosed', syntax: true },
];

/** UpdateAgentDefinition's: the broken definitions, and one that changes the key of the version it updates. */
const updateCases: Case[] = [
  ...cases,
  {
    name: "a changed name and version",
    body: JSON.stringify(minimalDefinition({ name: "Other", version: "9" })),
    binary: true,
  },
];

/** SetAgentDefinitionStatus's: broken status changes. */
const statusCases: Case[] = [
  { name: "an unknown member", body: '{"status":"DEPRECATED","colour":"red"}' },
  { name: "wrongly typed members", body: '{"status":true,"statusMessage":5}' },
  { name: "a status that does not exist", body: '{"status":"RETIRED"}' },
  { name: "a member given twice", body: '{"status":"ACTIVE","status":"DEPRECATED"}' },
  { name: "no status", body: '{"statusMessage":"why"}', binary: true },
  { name: "the unspecified status", body: '{"status":"DEFINITION_STATUS_UNSPECIFIED"}', binary: true },
  {
    name: "a message over 10,000 characters",
    body: JSON.stringify({ status: "ACTIVE", statusMessage: "x".repeat(10_001) }),
    binary: true,
  },
  { name: "text that is not JSON", body: '{"status": "ACT', syntax: true },
];

forEachDatabase((db) => {
  describe("the same body, the same issues, on every surface", () => {
    const server = useServer(db);
    let grpc: ReturnType<typeof createGrpcJsClient>;
    /** The id of a stored version, for the PUTs and PATCHes. */
    let id = "";
    beforeAll(async () => {
      grpc = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, server().authorization);
      const created = await fetch(`${server().baseUrl}${PATH}`, {
        method: "POST",
        headers: { authorization: server().authorization, "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition()),
      });
      expect(created.status).toBe(201);
      id = ((await created.json()) as { id: string }).id;
    });
    afterAll(() => grpc?.close());

    const overRest = async (method: string, path: string, body: string): Promise<Refusal> => {
      const res = await fetch(`${server().baseUrl}${path}`, {
        method,
        headers: { authorization: server().authorization, "content-type": "application/json" },
        body,
      });
      expect(res.status).toBe(400);
      const answer = (await res.json()) as { error: string; errors: Refusal["items"] };
      return { error: answer.error, items: items(answer.errors) };
    };

    const overConnect = async (rpc: string, message: string): Promise<Refusal> => {
      const answer = await postConnectJson(server().baseUrl, server().authorization, rpc, message);
      expect(answer.status).toBe(400);
      return { error: answer.validation?.error ?? "", items: items(answer.validation?.errors ?? []) };
    };

    const overGrpc = async (method: string, request: unknown): Promise<Refusal> => {
      const error = (await grpc.call(method as never, request as never).then(
        () => undefined,
        (e: ServiceError) => e,
      )) as ServiceError;
      expect(error?.code).toBe(3); // INVALID_ARGUMENT
      const [detail] = grpcErrorDetails(error) as ValidationError[];
      return { error: detail?.error ?? "", items: items(detail?.errors ?? []) };
    };

    /** What every surface must agree on, given the body's refusal over each (gRPC only when asked). */
    const sameEverywhere = async (
      { binary, syntax }: Case,
      rest: Refusal,
      connect: () => Promise<Refusal>,
      grpcRefusal: () => Promise<Refusal>,
    ) => {
      expect(rest.items.length).toBeGreaterThan(0);
      // Paths inside the body are its own: never under the request field that carries it over RPC.
      for (const item of rest.items) expect(item.path ?? "").not.toMatch(/^(agentCardAndTools|statusChange)\./);
      const overConnectJson = await connect();
      expect(overConnectJson.items).toEqual(rest.items);
      if (syntax !== true) expect(overConnectJson.error).toBe(rest.error);
      if (binary === true) expect(await grpcRefusal()).toEqual(rest);
    };

    describe("UpsertAgentDefinition: POST", () => {
      it.each(cases)("$name", async (c) => {
        await sameEverywhere(
          c,
          await overRest("POST", PATH, c.body),
          () => overConnect(UPSERT_RPC, `{"agentCardAndTools":${c.body}}`),
          () =>
            overGrpc(
              "upsertAgentDefinition",
              create(UpsertAgentDefinitionRequestSchema, {
                agentCardAndTools: fromJson(AgentDefinitionSchema, JSON.parse(c.body)),
              }),
            ),
        );
      });
    });

    describe("UpdateAgentDefinition: PUT", () => {
      it.each(updateCases)("$name", async (c) => {
        await sameEverywhere(
          c,
          await overRest("PUT", `${PATH}/${id}`, c.body),
          () => overConnect(UPDATE_RPC, `{"id":"${id}","agentCardAndTools":${c.body}}`),
          () =>
            overGrpc(
              "updateAgentDefinition",
              create(UpdateAgentDefinitionRequestSchema, {
                id,
                agentCardAndTools: fromJson(AgentDefinitionSchema, JSON.parse(c.body)),
              }),
            ),
        );
      });
    });

    describe("SetAgentDefinitionStatus: PATCH .../status", () => {
      it.each(statusCases)("$name", async (c) => {
        await sameEverywhere(
          c,
          await overRest("PATCH", `${PATH}/${id}/status`, c.body),
          () => overConnect(SET_STATUS_RPC, `{"id":"${id}","statusChange":${c.body}}`),
          () =>
            overGrpc(
              "setAgentDefinitionStatus",
              create(SetAgentDefinitionStatusRequestSchema, {
                id,
                statusChange: fromJson(StatusChangeSchema, JSON.parse(c.body)),
              }),
            ),
        );
      });
    });
  });
});
