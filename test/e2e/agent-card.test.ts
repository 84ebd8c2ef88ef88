import { create, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { status as grpcStatus, type ServiceError } from "@grpc/grpc-js";
import { beforeAll, describe, expect, it } from "vitest";
import { AgentCardSchema } from "../../gen/asor/v1/agent_card_pb.js";
import { AgentDefinitionService, GetAgentCardRequestSchema } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { a2aAgentCardValidator } from "../support/a2a-agent-card-schema.js";
import { exampleCard, fullCard, minimalCard } from "../support/agent-cards.js";
import { withAuthorization } from "../support/auth.js";
import { forEachDatabase } from "../support/databases.js";
import { exampleDefinition, minimalDefinition } from "../support/definitions.js";
import { fullDefinition } from "../support/full-definition.js";
import { createGrpcJsClient, grpcErrorDetails } from "../support/grpc-js-client.js";
import { useServer } from "../support/server.js";

const T = "/api/asor/v1/default/agentDefinition";
const C = "/asor/v1/agentDefinition";
const UNKNOWN_ID = "0123456789abcdef0123456789abcdef";
const validate = a2aAgentCardValidator();

/** The spec's example as another agent: its name, and an externalAgentID of its own (A3015). */
const example = (name: string, version = "1.0.0") => ({
  ...exampleDefinition(),
  name,
  version,
  externalAgentID: `ext-${name}`,
});

/**
 * The card a REST or RPC answer carries, as JSON, checked against A2A's AgentCard first, without the
 * registry's signature (one, checked for its shape here; test/e2e/card-signatures.test.ts verifies it).
 */
function a2aCard(body: unknown): Record<string, unknown> {
  expect(validate(body), JSON.stringify(validate.errors)).toBe(true);
  const { signatures, ...card } = body as Record<string, unknown>;
  expect(signatures).toEqual([{ protected: expect.any(String), signature: expect.any(String) }]);
  return card;
}

forEachDatabase((db) => {
  const server = useServer(db);
  /** What each fixture was stored as: its id and its agent's reference id. */
  const stored: Record<"example" | "full" | "minimal", { id: string; reference_id: string }> = {} as never;

  const post = async (def: unknown) => {
    const res = await fetch(`${server().baseUrl}${T}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: server().authorization },
      body: JSON.stringify(def),
    });
    expect(res.status, await res.clone().text()).toBeLessThan(300);
    return (await res.json()) as { id: string; reference_id: string };
  };
  const getCard = async (path: string, headers: Record<string, string> = {}) =>
    fetch(`${server().baseUrl}${path}`, { headers: { authorization: server().authorization, ...headers } });

  const deactivate = (id: string) =>
    fetch(`${server().baseUrl}${T}/${id}/status`, {
      method: "PATCH",
      headers: { "content-type": "application/json", authorization: server().authorization },
      body: JSON.stringify({ status: "DEACTIVATED" }),
    });

  beforeAll(async () => {
    stored.example = await post(example("Card Example Agent"));
    stored.full = await post(fullDefinition("card"));
    stored.minimal = await post(minimalDefinition({ name: "Card Minimal Agent" }));
  });

  describe.each([
    ["the reference text's path", T],
    ["the contract's path", C],
  ])("GET {id}/agentCard on %s", (_, base) => {
    it("answers the spec's example as an A2A v1.0 AgentCard, member by member", async () => {
      const res = await getCard(`${base}/${stored.example.id}/agentCard`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      expect(a2aCard(await res.json())).toEqual({ ...exampleCard(), name: "Card Example Agent" });
    });

    it("answers the full definition as an A2A v1.0 AgentCard, member by member", async () => {
      const res = await getCard(`${base}/${stored.full.id}/agentCard`);
      expect(res.status).toBe(200);
      expect(a2aCard(await res.json())).toEqual(fullCard("card"));
    });

    it("answers the minimal definition with every member A2A requires", async () => {
      const res = await getCard(`${base}/${stored.minimal.id}/agentCard`);
      expect(res.status).toBe(200);
      expect(a2aCard(await res.json())).toEqual({ ...minimalCard(), name: "Card Minimal Agent" });
    });

    it(
      "carries a strong ETag and a Cache-Control that revalidates with it (no max-age), as A2A asks of agent card " +
        "endpoints",
      async () => {
        const res = await getCard(`${base}/${stored.example.id}/agentCard`);
        expect(res.headers.get("etag")).toMatch(/^"[!#-~]+"$/);
        expect(res.headers.get("cache-control")).toBe("private, no-cache");
        const other = await getCard(`${base}/${stored.full.id}/agentCard`);
        expect(other.headers.get("etag")).not.toBe(res.headers.get("etag"));
      },
    );

    it(
      "answers a GET whose If-None-Match names the card's ETag 304 without a body, and one naming another " + "200",
      async () => {
        const first = await getCard(`${base}/${stored.example.id}/agentCard`);
        const etag = first.headers.get("etag") as string;
        const again = await getCard(`${base}/${stored.example.id}/agentCard`, { "if-none-match": etag });
        expect(again.status).toBe(304);
        expect(await again.text()).toBe("");
        expect(again.headers.get("etag")).toBe(etag);
        expect(again.headers.get("cache-control")).toBe(first.headers.get("cache-control"));
        const stale = await getCard(`${base}/${stored.example.id}/agentCard`, { "if-none-match": '"card1-stale"' });
        expect(stale.status).toBe(200);
        expect(a2aCard(await stale.json()).name).toBe("Card Example Agent");
      },
    );

    it("answers 404 NOT_FOUND for an unknown id and an unknown Agent_ID", async () => {
      for (const id of [UNKNOWN_ID, "Agent_ID=AGENT-999999"]) {
        const res = await getCard(`${base}/${encodeURIComponent(id)}/agentCard`);
        expect(res.status).toBe(404);
        expect(await res.json()).toMatchObject({
          errors: [expect.objectContaining({ code: "NOT_FOUND", field: "id" })],
        });
      }
    });

    it("answers 403 to a token without Setup: Agents, and 401 without a token", async () => {
      const development = await server().bearer({ domains: ["Development"] });
      const res = await getCard(`${base}/${stored.example.id}/agentCard`, { authorization: development });
      expect(res.status).toBe(403);
      expect(await res.json()).toMatchObject({ errors: [expect.objectContaining({ code: "PERMISSION_DENIED" })] });
      const anonymous = await fetch(`${server().baseUrl}${base}/${stored.example.id}/agentCard`);
      expect(anonymous.status).toBe(401);
      expect(anonymous.headers.get("www-authenticate")).toMatch(/^Bearer/);
    });

    it("refuses any other method with 405", async () => {
      const res = await fetch(`${server().baseUrl}${base}/${stored.example.id}/agentCard`, {
        method: "POST",
        headers: { authorization: server().authorization },
      });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("GET");
    });
  });

  describe("an agent's card over its versions", () => {
    it("reads Agent_ID=... as GET does: the agent's current version, with that version's ETag", async () => {
      const first = await post(example("Card Versions Agent", "1.0.0"));
      const second = await post(example("Card Versions Agent", "2.0.0"));
      expect(second.reference_id).toBe(first.reference_id);
      const byReference = await getCard(`${T}/${encodeURIComponent(first.reference_id)}/agentCard`);
      expect(byReference.status).toBe(200);
      expect(a2aCard(await byReference.json())).toEqual({ ...exampleCard("2.0.0"), name: "Card Versions Agent" });
      const definition = await getCard(`${T}/${encodeURIComponent(first.reference_id)}`);
      expect((await definition.json()).id).toBe(second.id);
      const bySecondId = await getCard(`${T}/${second.id}/agentCard`);
      expect(byReference.headers.get("etag")).toBe(bySecondId.headers.get("etag"));
      const byFirstId = await getCard(`${T}/${first.id}/agentCard`);
      expect(a2aCard(await byFirstId.json()).version).toBe("1.0.0");
      expect(byFirstId.headers.get("etag")).not.toBe(byReference.headers.get("etag"));
    });

    it(
      "follows the agent's status: a deactivated version's card is gone (410 CARD_DEACTIVATED), and Agent_ID=... " +
        "passes over it",
      async () => {
        const first = await post(example("Card Status Agent", "1.0.0"));
        const second = await post(example("Card Status Agent", "2.0.0"));
        const before = await getCard(`${T}/${second.id}/agentCard`);
        expect(before.status).toBe(200);
        expect((await deactivate(second.id)).status).toBe(200);
        // Also to a client revalidating the card it has: no 304 for a withdrawn card.
        for (const headers of [{}, { "if-none-match": before.headers.get("etag") as string }] as Record<
          string,
          string
        >[]) {
          const after = await getCard(`${T}/${second.id}/agentCard`, headers);
          expect(after.status).toBe(410);
          expect(await after.json()).toMatchObject({
            errors: [expect.objectContaining({ code: "CARD_DEACTIVATED", field: "id" })],
          });
        }
        // The definition itself stays readable by id.
        expect((await getCard(`${T}/${second.id}`)).status).toBe(200);
        const byReference = await getCard(`${T}/${encodeURIComponent(first.reference_id)}/agentCard`);
        expect(a2aCard(await byReference.json()).version).toBe("1.0.0");
        expect(byReference.headers.get("etag")).toBe((await getCard(`${T}/${first.id}/agentCard`)).headers.get("etag"));
        // Every version off: the reference names the newest of all, whose card is gone too.
        expect((await deactivate(encodeURIComponent(first.reference_id))).status).toBe(200);
        expect((await getCard(`${T}/${encodeURIComponent(first.reference_id)}/agentCard`)).status).toBe(410);
      },
    );

    it("changes the card and its ETag when the definition changes, and keeps both while it does not", async () => {
      const def = example("Card Change Agent");
      const { id } = await post(def);
      const before = await getCard(`${C}/${id}/agentCard`);
      const again = await getCard(`${T}/${id}/agentCard`);
      expect(again.headers.get("etag")).toBe(before.headers.get("etag"));
      await post({ ...def, description: "Now does more" });
      const after = await getCard(`${C}/${id}/agentCard`);
      expect(after.headers.get("etag")).not.toBe(before.headers.get("etag"));
      expect(a2aCard(await after.json()).description).toBe("Now does more");
    });
  });

  describe("GetAgentCard over RPC", () => {
    it("answers the card over gRPC (@grpc/grpc-js): the same members as REST", async () => {
      const client = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, server().authorization);
      try {
        for (const [name, expected] of [
          ["full", fullCard("card")],
          ["minimal", { ...minimalCard(), name: "Card Minimal Agent" }],
        ] as const) {
          const card = await client.call(
            "getAgentCard",
            create(GetAgentCardRequestSchema, { id: stored[name].id }),
            AgentCardSchema,
          );
          // Protobuf JSON leaves empty lists out; A2A's required lists are REST's to add.
          const json = toJson(AgentCardSchema, card) as Record<string, any>;
          for (const skill of json.skills) skill.tags ??= [];
          expect(a2aCard(json)).toEqual(expected);
        }
      } finally {
        client.close();
      }
    });

    it("answers NOT_FOUND for an unknown id and PERMISSION_DENIED without Setup: Agents over gRPC", async () => {
      const client = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, server().authorization);
      const development = createGrpcJsClient(
        AgentDefinitionService,
        `127.0.0.1:${server().port}`,
        await server().bearer({ domains: ["Development"] }),
      );
      try {
        const missing = await client
          .call("getAgentCard", create(GetAgentCardRequestSchema, { id: UNKNOWN_ID }))
          .catch((e: ServiceError) => e);
        expect((missing as ServiceError).code).toBe(grpcStatus.NOT_FOUND);
        const denied = await development
          .call("getAgentCard", create(GetAgentCardRequestSchema, { id: stored.full.id }))
          .catch((e: ServiceError) => e);
        expect((denied as ServiceError).code).toBe(grpcStatus.PERMISSION_DENIED);
      } finally {
        client.close();
        development.close();
      }
    });

    it(
      "answers FAILED_PRECONDITION with CARD_DEACTIVATED for a deactivated version over gRPC and Connect, as REST " +
        "answers 410",
      async () => {
        const { id } = await post(example("Card Withdrawn Agent"));
        expect((await deactivate(id)).status).toBe(200);
        const client = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, server().authorization);
        try {
          const err = (await client
            .call("getAgentCard", create(GetAgentCardRequestSchema, { id }))
            .catch((e: ServiceError) => e)) as ServiceError;
          expect(err.code).toBe(grpcStatus.FAILED_PRECONDITION);
          expect(toJson(ValidationErrorSchema, grpcErrorDetails(err)[0] as never)).toMatchObject({
            errors: [expect.objectContaining({ code: "CARD_DEACTIVATED" })],
          });
        } finally {
          client.close();
        }
        const connect = createClient(
          AgentDefinitionService,
          createConnectTransport({
            baseUrl: server().baseUrl,
            httpVersion: "1.1",
            useHttpGet: true,
            interceptors: [withAuthorization(server().authorization)],
          }),
        );
        expect(ConnectError.from(await connect.getAgentCard({ id }).catch((e: unknown) => e)).code).toBe(
          Code.FailedPrecondition,
        );
      },
    );

    it("sends ETag and Cache-Control with a Connect GET, like the REST answer", async () => {
      const client = createClient(
        AgentDefinitionService,
        createConnectTransport({
          baseUrl: server().baseUrl,
          httpVersion: "1.1",
          useHttpGet: true,
          interceptors: [withAuthorization(server().authorization)],
        }),
      );
      let headers: Headers | undefined;
      const card = await client.getAgentCard({ id: stored.example.id }, { onHeader: (h) => (headers = h) });
      expect(card.name).toBe("Card Example Agent");
      const rest = await getCard(`${T}/${stored.example.id}/agentCard`);
      expect(headers?.get("etag")).toBe(rest.headers.get("etag"));
      expect(headers?.get("cache-control")).toBe(rest.headers.get("cache-control"));
      const err = await client.getAgentCard({ id: UNKNOWN_ID }).catch((e: unknown) => e);
      expect(ConnectError.from(err).code).toBe(Code.NotFound);
    });
  });
});
