/**
 * The same body gives the same issues on every surface (issue 23, item 5):
 * a definition POSTed over REST, sent in UpsertAgentDefinition over Connect
 * JSON, and (where the problem survives binary encoding) over gRPC, is
 * refused with the same codes, fields and paths, relative to the body, and
 * the same summary. One body check (src/transport/body-check.ts) reads REST
 * bodies and RPC JSON messages; the service's own rules are given relative to
 * the body by the operations (src/domain/body-field.ts). The one designed
 * difference is not asked here: Connect JSON also takes the proto names of
 * members (`external_agent_id`), as protobuf JSON does (docs/decisions.md).
 */
import { create, fromJson } from "@bufbuild/protobuf";
import type { ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import type { ValidationError } from "../../gen/asor/v1/error_pb.js";
import { postConnectJson, UPSERT_RPC } from "../support/connect-json.js";
import { testDatabases } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { createGrpcJsClient, grpcErrorDetails } from "../support/grpc-js-client.js";
import { useServer } from "../support/server.js";

const PATH = "/api/asor/v1/default/agentDefinition";

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
const cases: Array<{ name: string; body: string; binary?: boolean; syntax?: boolean }> = [
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

describe("the same body, the same issues, on every surface", () => {
  const [sqlite] = testDatabases();
  const server = useServer(sqlite!);
  let grpc: ReturnType<typeof createGrpcJsClient>;
  beforeAll(() => {
    grpc = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, server().authorization);
  });
  afterAll(() => grpc?.close());

  const overRest = async (body: string): Promise<Refusal> => {
    const res = await fetch(`${server().baseUrl}${PATH}`, {
      method: "POST",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body,
    });
    expect(res.status).toBe(400);
    const answer = (await res.json()) as { error: string; errors: Refusal["items"] };
    return { error: answer.error, items: items(answer.errors) };
  };

  const overConnect = async (body: string): Promise<Refusal> => {
    const answer = await postConnectJson(
      server().baseUrl,
      server().authorization,
      UPSERT_RPC,
      `{"agentCardAndTools":${body}}`,
    );
    expect(answer.status).toBe(400);
    return { error: answer.validation?.error ?? "", items: items(answer.validation?.errors ?? []) };
  };

  const overGrpc = async (body: string): Promise<Refusal> => {
    const definition = fromJson(AgentDefinitionSchema, JSON.parse(body));
    const error = (await grpc
      .call("upsertAgentDefinition", create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: definition }))
      .then(
        () => undefined,
        (e: ServiceError) => e,
      )) as ServiceError;
    expect(error?.code).toBe(3); // INVALID_ARGUMENT
    const [detail] = grpcErrorDetails(error) as ValidationError[];
    return { error: detail?.error ?? "", items: items(detail?.errors ?? []) };
  };

  it.each(cases)("$name", async ({ body, binary, syntax }) => {
    const rest = await overRest(body);
    expect(rest.items.length).toBeGreaterThan(0);
    // Paths inside the body are its own: never under the request field that carries it over RPC.
    for (const item of rest.items) expect(item.path ?? "").not.toMatch(/^agentCardAndTools\./);
    const connect = await overConnect(body);
    expect(connect.items).toEqual(rest.items);
    if (syntax !== true) expect(connect.error).toBe(rest.error);
    if (binary === true) expect(await overGrpc(body)).toEqual(rest);
  });
});
