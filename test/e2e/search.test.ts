/**
 * The list's filters, keyword search, order and page tokens over REST (both
 * base paths, repeated query parameters) and gRPC (@grpc/grpc-js), on SQLite
 * and MariaDB; and a token walk over 500 definitions while others write.
 */
import { create, type MessageInitShape, toJson } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { status as grpcStatus, type ServiceError } from "@grpc/grpc-js";
import { beforeAll, describe, expect, it } from "vitest";
import {
  AgentDefinitionService,
  ListAgentDefinitionsRequestSchema,
  type ListAgentDefinitionsResponseSchema,
  ListAgentDefinitionVersionsRequestSchema,
  type ListAgentDefinitionVersionsResponseSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { TenantAdminService } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { withAuthorization } from "../support/auth.js";
import { forEachDatabase } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { createGrpcJsClient, grpcErrorDetails } from "../support/grpc-js-client.js";
import { useServer } from "../support/server.js";

/** The definitions the filters are tried on, by name; "Alpha" has two versions. */
const fixtures: Array<Record<string, unknown>> = [
  minimalDefinition({
    name: "Alpha",
    description: "Analyzes customer sentiment",
    platform: { id: "Platform=OTHER" },
    externalAgentID: "ext-alpha",
    skills: [
      {
        id: "sentiment",
        name: "Sentiment Analysis",
        description: "Reads the mood",
        tags: [{ tag: "cognitive" }, { tag: "support" }],
      },
    ],
    hostConfig: [
      {
        skillId: "sentiment",
        executionMode: { id: "Mode=Ambient" },
        hostResources: [{ tool_name: "T", description: "D", agent_resource: { id: "res-1" } }],
      },
    ],
  }),
  minimalDefinition({
    name: "Beta",
    version: "2.0.0",
    platform: { id: "Platform=CLOUD" },
    description: "Routes tickets",
    skills: [
      { id: "routing", name: "Ticket Routing", description: "Routes customer tickets", tags: [{ tag: "integration" }] },
    ],
    hostConfig: [
      {
        skillId: "routing",
        executionMode: { id: "Mode=Delegate" },
        hostResources: [{ tool_name: "T", description: "D", agent_resource: { id: "res-2" } }],
      },
    ],
  }),
  minimalDefinition({
    name: "Gamma",
    provider: { id: "Provider=Other" },
    overview: "Zebra crossing",
    skills: [{ id: "sentiment", name: "Mood", description: "Reads the customer", tags: [{ tag: "support" }] }],
    hostConfig: [
      {
        skillId: "sentiment",
        executionMode: { id: "Mode=Delegate" },
        hostResources: [{ tool_name: "T", description: "D", agent_resource: { id: "res-1" } }],
      },
    ],
  }),
  minimalDefinition({
    name: "Alpha",
    version: "2.0.0",
    description: "Analyzes customer sentiment, better",
    skills: [{ id: "sentiment", name: "S", description: "D", tags: [{ tag: "cognitive" }] }],
  }),
];

/** A case: REST query string, the same request for gRPC, and the "name version" of each match in order. */
type Case = [string, string, Omit<MessageInitShape<typeof ListAgentDefinitionsRequestSchema>, "$typeName">, string[]];
const cases: Case[] = [
  ["no filter", "", {}, ["Alpha 1.0.0", "Beta 2.0.0", "Gamma 1.0.0", "Alpha 2.0.0"]],
  ["name", "name=Alpha", { name: ["Alpha"] }, ["Alpha 1.0.0", "Alpha 2.0.0"]],
  ["provider", "provider=Provider%3DOther", { provider: ["Provider=Other"] }, ["Gamma 1.0.0"]],
  ["platform", "platform=Platform%3DCLOUD", { platform: ["Platform=CLOUD"] }, ["Beta 2.0.0"]],
  ["version", "version=2.0.0", { version: ["2.0.0"] }, ["Beta 2.0.0", "Alpha 2.0.0"]],
  ["tag", "tag=support", { tag: ["support"] }, ["Alpha 1.0.0", "Gamma 1.0.0"]],
  [
    "tag twice ORs",
    "tag=support&tag=integration",
    { tag: ["support", "integration"] },
    ["Alpha 1.0.0", "Beta 2.0.0", "Gamma 1.0.0"],
  ],
  ["skillId", "skillId=sentiment", { skillId: ["sentiment"] }, ["Alpha 1.0.0", "Gamma 1.0.0", "Alpha 2.0.0"]],
  [
    "executionMode",
    "executionMode=Mode%3DDelegate",
    { executionMode: ["Mode=Delegate"] },
    ["Beta 2.0.0", "Gamma 1.0.0"],
  ],
  ["resource", "resource=res-1", { resource: ["res-1"] }, ["Alpha 1.0.0", "Gamma 1.0.0"]],
  ["externalAgentID", "externalAgentID=ext-alpha", { externalAgentId: ["ext-alpha"] }, ["Alpha 1.0.0"]],
  ["status", "status=DEPRECATED", { status: ["DEPRECATED"] }, []],
  ["status ALL", "status=ALL", { status: ["ALL"] }, ["Alpha 1.0.0", "Beta 2.0.0", "Gamma 1.0.0", "Alpha 2.0.0"]],
  [
    "updatedSince",
    "updatedSince=2000-01-01T00%3A00%3A00Z",
    { updatedSince: "2000-01-01T00:00:00Z" },
    ["Alpha 1.0.0", "Beta 2.0.0", "Gamma 1.0.0", "Alpha 2.0.0"],
  ],
  ["latest", "latest=true", { latest: true }, ["Beta 2.0.0", "Gamma 1.0.0", "Alpha 2.0.0"]],
  ["q", "q=customer", { q: "customer" }, ["Alpha 1.0.0", "Beta 2.0.0", "Gamma 1.0.0", "Alpha 2.0.0"]],
  ["q, every word", "q=reads%20customer", { q: "reads customer" }, ["Alpha 1.0.0", "Gamma 1.0.0"]],
  ["q, case and accents folded, the last word begun", "q=Z%C3%88BRA%20cross", { q: "ZÈBRA cross" }, ["Gamma 1.0.0"]],
  ["q, an earlier word whole", "q=custom%20reads", { q: "custom reads" }, []],
  [
    "two filters",
    "tag=support&provider=Provider%3DAcme",
    { tag: ["support"], provider: ["Provider=Acme"] },
    ["Alpha 1.0.0"],
  ],
  ["filter and latest", "name=Alpha&latest=true", { name: ["Alpha"], latest: true }, ["Alpha 2.0.0"]],
  [
    "q and a filter",
    "q=customer&skillId=sentiment",
    { q: "customer", skillId: ["sentiment"] },
    ["Alpha 1.0.0", "Gamma 1.0.0", "Alpha 2.0.0"],
  ],
  [
    "q and two filters",
    "q=sentiment&tag=cognitive&version=2.0.0",
    { q: "sentiment", tag: ["cognitive"], version: ["2.0.0"] },
    ["Alpha 2.0.0"],
  ],
  [
    "order by name desc",
    "orderBy=name%20desc",
    { orderBy: "name desc" },
    ["Gamma 1.0.0", "Beta 2.0.0", "Alpha 2.0.0", "Alpha 1.0.0"],
  ],
  [
    "order by createdAt desc with q",
    "orderBy=createdAt%20desc&q=customer",
    { orderBy: "createdAt desc", q: "customer" },
    ["Alpha 2.0.0", "Gamma 1.0.0", "Beta 2.0.0", "Alpha 1.0.0"],
  ],
];

forEachDatabase((db) => {
  const server = useServer(db);
  const tenant = "search";
  const walkTenant = "walk";
  const admin = () =>
    createClient(
      TenantAdminService,
      createConnectTransport({
        baseUrl: server().baseUrl,
        httpVersion: "1.1",
        interceptors: [withAuthorization(server().authorization)],
      }),
    );
  const collection = (t: string) => `${server().baseUrl}/api/asor/v1/${t}/agentDefinition`;
  const token = (t: string) => server().bearer({ tenant: t });
  const post = async (t: string, def: unknown) => {
    const res = await fetch(collection(t), {
      method: "POST",
      headers: { "content-type": "application/json", authorization: await token(t) },
      body: JSON.stringify(def),
    });
    expect(res.status, JSON.stringify(await res.clone().json())).toBe(201);
    return (await res.json()) as { id: string; reference_id: string; name: string; version: string };
  };
  const getJson = async (url: string, t: string) => {
    const res = await fetch(url, { headers: { authorization: await token(t) } });
    return {
      status: res.status,
      body: (await res.json()) as {
        total: number;
        data: Array<{ id: string; name: string; version: string }>;
        nextPageToken?: string;
        errors?: unknown[];
      },
    };
  };
  const grpc = async <T>(t: string, use: (client: ReturnType<typeof createGrpcJsClient>) => Promise<T>): Promise<T> => {
    const client = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, await token(t));
    try {
      return await use(client);
    } finally {
      client.close();
    }
  };
  const grpcList = (t: string, init: Omit<MessageInitShape<typeof ListAgentDefinitionsRequestSchema>, "$typeName">) =>
    grpc(t, (c) =>
      c.call(
        "listAgentDefinitions",
        create(ListAgentDefinitionsRequestSchema, { tenant: t, limit: 100, ...init }),
        {} as typeof ListAgentDefinitionsResponseSchema,
      ),
    );
  const grpcFailure = async (promise: Promise<unknown>) => {
    const err = (await promise.then(
      () => undefined,
      (e: unknown) => e,
    )) as ServiceError;
    expect(err?.code).toBe(grpcStatus.INVALID_ARGUMENT);
    const [detail] = grpcErrorDetails(err);
    return (toJson(ValidationErrorSchema, detail as never) as { errors: unknown[] }).errors;
  };
  const keys = (data: ReadonlyArray<{ name: string; version: string }>) => data.map((d) => `${d.name} ${d.version}`);

  beforeAll(async () => {
    await admin().createTenant({ name: tenant, sequencePrefix: "S-" });
    await admin().createTenant({ name: walkTenant, sequencePrefix: "W-" });
    for (const def of fixtures) await post(tenant, def);
  });

  describe("over REST", () => {
    it.each(cases)("%s", async (_, query, _grpc, expected) => {
      const { status, body } = await getJson(
        `${collection(tenant)}?limit=100${query === "" ? "" : `&${query}`}`,
        tenant,
      );
      expect(status).toBe(200);
      expect(keys(body.data)).toEqual(expected);
      expect(body.total).toBe(expected.length);
      expect(body.nextPageToken).toBeUndefined();
    });

    it("serves the same on the contract's path, the tenant from the token", async () => {
      const { body } = await getJson(`${server().baseUrl}/asor/v1/agentDefinition?tag=support&tag=cognitive`, tenant);
      expect(keys(body.data)).toEqual(["Alpha 1.0.0", "Gamma 1.0.0", "Alpha 2.0.0"]);
    });

    it("refuses unknown parameters, a scalar given twice, a bad boolean and a bad status, naming each", async () => {
      const { status, body } = await getJson(`${collection(tenant)}?tags=x&q=abc&q=def&latest=yes&status=GONE`, tenant);
      expect(status).toBe(400);
      expect(body.errors).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ code: "UNKNOWN_FIELD", field: "tags" }),
          expect.objectContaining({ code: "UNKNOWN_FIELD", field: "q" }),
          expect.objectContaining({ code: "INVALID_TYPE", field: "latest" }),
        ]),
      );
      const bad = await getJson(`${collection(tenant)}?status=GONE&orderBy=size`, tenant);
      expect(bad.status).toBe(400);
      expect(bad.body.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field: "status" })]));
      const order = await getJson(`${collection(tenant)}?orderBy=size`, tenant);
      expect(order.body.errors).toEqual([
        expect.objectContaining({ code: "INVALID_VALUE", field: "orderBy", path: "orderBy" }),
      ]);
    });

    it(
      "pages by token, and refuses a token reused with other filters, another tenant, offset, or " + "malformed",
      async () => {
        const first = await getJson(`${collection(tenant)}?limit=2&tag=support&tag=cognitive`, tenant);
        expect(keys(first.body.data)).toEqual(["Alpha 1.0.0", "Gamma 1.0.0"]);
        const pageToken = first.body.nextPageToken as string;
        expect(pageToken).toMatch(/^[A-Za-z0-9_-]+$/);
        const second = await getJson(
          `${collection(tenant)}?limit=2&tag=cognitive&tag=support&pageToken=${pageToken}`,
          tenant,
        );
        expect([keys(second.body.data), second.body.total, second.body.nextPageToken]).toEqual([
          ["Alpha 2.0.0"],
          3,
          undefined,
        ]);
        for (const [url, t] of [
          [`${collection(tenant)}?tag=support&pageToken=${pageToken}`, tenant],
          [`${collection(tenant)}?tag=support&tag=cognitive&orderBy=name&pageToken=${pageToken}`, tenant],
          [`${collection(tenant)}?tag=support&tag=cognitive&offset=2&pageToken=${pageToken}`, tenant],
          [`${collection(walkTenant)}?tag=support&tag=cognitive&pageToken=${pageToken}`, walkTenant],
          [`${collection(tenant)}?pageToken=%21%21`, tenant],
        ] as const) {
          const { status, body } = await getJson(url, t);
          expect(status, url).toBe(400);
          expect(body.errors).toEqual([
            expect.objectContaining({ code: "INVALID_PAGE_TOKEN", field: "pageToken", path: "pageToken" }),
          ]);
        }
      },
    );

    it("pages an agent's versions by token", async () => {
      const { body } = await getJson(`${collection(tenant)}?name=Alpha&limit=1`, tenant);
      const id = body.data[0]!.id;
      const first = await getJson(`${collection(tenant)}/${id}/versions?limit=1`, tenant);
      expect([keys(first.body.data), first.body.total]).toEqual([["Alpha 2.0.0"], 2]);
      const second = await getJson(
        `${collection(tenant)}/${id}/versions?limit=1&pageToken=${first.body.nextPageToken}`,
        tenant,
      );
      expect([keys(second.body.data), second.body.nextPageToken]).toEqual([["Alpha 1.0.0"], undefined]);
      const mixed = await getJson(`${collection(tenant)}?pageToken=${first.body.nextPageToken}`, tenant);
      expect(mixed.body.errors).toEqual([expect.objectContaining({ code: "INVALID_PAGE_TOKEN" })]);
    });
  });

  describe("over gRPC", () => {
    it.each(cases)("%s", async (_, _rest, request, expected) => {
      const page = await grpcList(tenant, request);
      expect(keys(page.data)).toEqual(expected);
      expect(page.total).toBe(expected.length);
      expect(page.nextPageToken).toBeUndefined();
    });

    it("pages by token and refuses a token with other filters or offset", async () => {
      const first = await grpcList(tenant, { limit: 3, q: "customer" });
      expect(keys(first.data)).toEqual(["Alpha 1.0.0", "Beta 2.0.0", "Gamma 1.0.0"]);
      expect(first.nextPageToken).toBeDefined();
      const second = await grpcList(tenant, { limit: 3, q: "customer", pageToken: first.nextPageToken });
      expect([keys(second.data), second.total, second.nextPageToken]).toEqual([["Alpha 2.0.0"], 4, undefined]);
      for (const request of [
        { q: "sentiment", pageToken: first.nextPageToken },
        { q: "customer", offset: 0, pageToken: first.nextPageToken },
        { pageToken: "garbage!" },
      ]) {
        expect(await grpcFailure(grpcList(tenant, request))).toEqual([
          expect.objectContaining({ code: "INVALID_PAGE_TOKEN", field: "pageToken" }),
        ]);
      }
    });

    it("pages an agent's versions by token", async () => {
      const [alpha] = (await grpcList(tenant, { name: ["Alpha"], limit: 1 })).data;
      const versions = (init: object) =>
        grpc(tenant, (c) =>
          c.call(
            "listAgentDefinitionVersions",
            create(ListAgentDefinitionVersionsRequestSchema, { tenant, id: alpha!.id, limit: 1, ...init }),
            {} as typeof ListAgentDefinitionVersionsResponseSchema,
          ),
        );
      const first = await versions({});
      const second = await versions({ pageToken: first.nextPageToken });
      expect([keys(first.data), keys(second.data), second.nextPageToken, second.total]).toEqual([
        ["Alpha 2.0.0"],
        ["Alpha 1.0.0"],
        undefined,
        2,
      ]);
    });
  });

  describe("orderBy=relevance", () => {
    const rankTenant = "rank";
    beforeAll(async () => {
      await admin().createTenant({ name: rankTenant, sequencePrefix: "R-" });
      // Definitions without the word: a full-text score weighs a word by how rare it is in the table.
      for (let i = 0; i < 6; i++)
        await post(rankTenant, minimalDefinition({ name: `Filler ${i}`, description: "Keeps the ledger tidy" }));
      await post(rankTenant, minimalDefinition({ name: "Once", description: "Reads one invoice and files it" }));
      await post(
        rankTenant,
        minimalDefinition({
          name: "Invoice Many",
          description: "Checks every invoice total",
          skills: [
            { id: "s1", name: "Invoice check", description: "Reads the invoice lines", tags: [{ tag: "invoice" }] },
          ],
        }),
      );
    });

    it("ranks over REST and gRPC, pages by token, and keeps q's total; q's own order stays creation", async () => {
      const rest = await getJson(`${collection(rankTenant)}?q=invoice&orderBy=relevance`, rankTenant);
      expect([rest.status, rest.body.data.map((d) => d.name), rest.body.total]).toEqual([
        200,
        ["Invoice Many", "Once"],
        2,
      ]);
      const plain = await getJson(`${collection(rankTenant)}?q=invoice`, rankTenant);
      expect(plain.body.data.map((d) => d.name)).toEqual(["Once", "Invoice Many"]);
      const first = await getJson(`${collection(rankTenant)}?q=invoi&orderBy=relevance&limit=1`, rankTenant);
      const second = await getJson(
        `${collection(rankTenant)}?q=invoi&orderBy=relevance&limit=1&pageToken=${first.body.nextPageToken}`,
        rankTenant,
      );
      expect([first.body.data.map((d) => d.name), second.body.data.map((d) => d.name), second.body.total]).toEqual([
        ["Invoice Many"],
        ["Once"],
        2,
      ]);
      expect(second.body.nextPageToken).toBeUndefined();
      const viaGrpc = await grpcList(rankTenant, { q: "invoice", orderBy: "relevance" });
      expect(viaGrpc.data.map((d) => d.name)).toEqual(["Invoice Many", "Once"]);
    });

    it("is refused without q, naming orderBy, over REST and gRPC", async () => {
      const { status, body } = await getJson(`${collection(rankTenant)}?orderBy=relevance`, rankTenant);
      expect(status).toBe(400);
      expect(body.errors).toEqual([expect.objectContaining({ code: "INVALID_VALUE", field: "orderBy" })]);
      expect(await grpcFailure(grpcList(rankTenant, { orderBy: "relevance" }))).toEqual([
        expect.objectContaining({ code: "INVALID_VALUE", field: "orderBy" }),
      ]);
    });
  });

  describe("a token walk while others write", () => {
    it("returns each of 500 definitions exactly once, whatever is inserted meanwhile, over REST and gRPC", {
      timeout: 240_000,
    }, async () => {
      const originals: string[] = [];
      for (let at = 0; at < 500; at += 10) {
        const batch = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            post(
              walkTenant,
              minimalDefinition({
                name: `Walker ${at + i}`,
                skills: [{ id: "w", name: "Walk", description: "Walks", tags: [{ tag: "walk" }] }],
              }),
            ),
          ),
        );
        originals.push(...batch.map((d) => d.id));
      }
      let inserted = 0;
      const insertSome = () =>
        Promise.all(
          [0, 1].map(() =>
            post(
              walkTenant,
              minimalDefinition({
                name: `Newcomer ${inserted++}`,
                skills: [{ id: "w", name: "Walk", description: "Walks", tags: [{ tag: "walk" }] }],
              }),
            ),
          ),
        );

      for (const [surface, orderBy] of [
        ["rest", "createdAt"],
        ["rest", "name desc"],
        ["grpc", "createdAt desc"],
      ] as const) {
        const seen: string[] = [];
        let pageToken: string | undefined;
        for (let pages = 0; pages < 1000; pages++) {
          // Writers race the walk: new definitions land before, between and after the pages.
          const writes = insertSome();
          let page: { data: ReadonlyArray<{ id: string }>; nextPageToken?: string | undefined };
          if (surface === "rest") {
            const query = new URLSearchParams({
              limit: "17",
              tag: "walk",
              orderBy,
              ...(pageToken === undefined ? {} : { pageToken }),
            });
            const answer = await getJson(`${collection(walkTenant)}?${query}`, walkTenant);
            expect(answer.status).toBe(200);
            page = answer.body;
          } else {
            page = await grpcList(walkTenant, {
              limit: 17,
              tag: ["walk"],
              orderBy,
              ...(pageToken === undefined ? {} : { pageToken }),
            });
          }
          await writes;
          seen.push(...page.data.map((d) => d.id));
          pageToken = page.nextPageToken;
          if (pageToken === undefined) break;
        }
        expect(pageToken, `${surface} ${orderBy}: the walk ended`).toBeUndefined();
        expect(new Set(seen).size, `${surface} ${orderBy}: no row twice`).toBe(seen.length);
        const seenSet = new Set(seen);
        expect(
          originals.filter((id) => !seenSet.has(id)),
          `${surface} ${orderBy}: every original row`,
        ).toEqual([]);
      }
      expect(inserted).toBeGreaterThan(40);
    });
  });
});
