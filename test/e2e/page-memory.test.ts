/**
 * A list of large definitions, in a process with the production heap
 * (`npm start`'s --max-old-space-size=128): one Connect JSON list of 40
 * definitions of ~750 KB each used to end the process (JavaScript heap out of
 * memory), and REST answered a 118.7 MB page (issue 25). Pages now end at
 * PAGE_MAX_BYTES, JSON is written from the stored bytes, and every definition
 * is reached by paging, on every protocol, with four lists at once each.
 */
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  AgentDefinitionService,
  ListAgentDefinitionsRequestSchema,
  type ListAgentDefinitionsResponse,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { withAuthorization } from "../support/auth.js";
import type { FreshDatabase } from "../support/databases.js";
import { forEachDatabase } from "../support/databases.js";
import { largeDefinition } from "../support/definitions.js";
import { createGrpcJsClient } from "../support/grpc-js-client.js";
import { type ReachableServer, startServerProcess } from "../support/runtimes.js";
import { PRODUCTION_NODE_FLAGS, type ServerProcess } from "../support/server-process.js";

const DEFINITIONS = 40;

/** A page as every client reads it: the ids, and the token of the next. */
interface Page {
  readonly ids: string[];
  readonly next: string | undefined;
}

forEachDatabase((db) => {
  let database: FreshDatabase;
  let server: ReachableServer & ServerProcess;

  beforeAll(async () => {
    database = await db.create();
    server = await startServerProcess(database, {}, "node", PRODUCTION_NODE_FLAGS);
    for (let i = 0; i < DEFINITIONS; i++) {
      const res = await fetch(`${server.baseUrl}/asor/v1/agentDefinition`, {
        method: "POST",
        headers: { authorization: server.authorization, "content-type": "application/json" },
        body: JSON.stringify(largeDefinition(i)),
      });
      expect(res.status).toBe(201);
    }
  }, 180_000);

  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
  });

  const fromResponse = (response: ListAgentDefinitionsResponse): Page => ({
    ids: response.data.map((d) => d.id),
    next: response.nextPageToken,
  });
  const request = (pageToken: string | undefined) =>
    create(ListAgentDefinitionsRequestSchema, { limit: 100, ...(pageToken === undefined ? {} : { pageToken }) });
  const connectClient = (transport: "connect-json" | "connect-binary" | "grpc-web") => {
    const options = {
      baseUrl: server.baseUrl,
      httpVersion: "1.1" as const,
      interceptors: [withAuthorization(server.authorization)],
    };
    return createClient(
      AgentDefinitionService,
      transport === "grpc-web"
        ? createGrpcWebTransport(options)
        : createConnectTransport({ ...options, useBinaryFormat: transport === "connect-binary" }),
    );
  };

  /** Each protocol's read of one page. */
  const protocols: Record<string, () => (pageToken: string | undefined) => Promise<Page>> = {
    rest: () => async (pageToken) => {
      const query = new URLSearchParams({ limit: "100", ...(pageToken === undefined ? {} : { pageToken }) });
      const res = await fetch(`${server.baseUrl}/asor/v1/agentDefinition?${query}`, {
        headers: { authorization: server.authorization },
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { data: Array<{ id: string }>; nextPageToken?: string };
      return { ids: body.data.map((d) => d.id), next: body.nextPageToken };
    },
    "connect-json": () => {
      const client = connectClient("connect-json");
      return async (pageToken) => fromResponse(await client.listAgentDefinitions(request(pageToken)));
    },
    "connect-binary": () => {
      const client = connectClient("connect-binary");
      return async (pageToken) => fromResponse(await client.listAgentDefinitions(request(pageToken)));
    },
    "grpc-web": () => {
      const client = connectClient("grpc-web");
      return async (pageToken) => fromResponse(await client.listAgentDefinitions(request(pageToken)));
    },
    grpc: () => {
      const client = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server.port}`, server.authorization);
      return async (pageToken) =>
        fromResponse(
          await client.call(
            "listAgentDefinitions",
            request(pageToken),
            AgentDefinitionService.method.listAgentDefinitions.output,
          ),
        );
    },
  };

  /** Every id a client reaches by following nextPageToken from the first page. */
  async function pageThrough(read: (pageToken: string | undefined) => Promise<Page>): Promise<string[]> {
    const ids: string[] = [];
    let token: string | undefined;
    do {
      const page = await read(token);
      expect(page.ids.length).toBeGreaterThan(0);
      ids.push(...page.ids);
      token = page.next;
    } while (token !== undefined && ids.length <= DEFINITIONS);
    return ids;
  }

  it.each(Object.keys(protocols))(
    "answers four lists of large definitions at once over %s, each reaching every definition",
    async (protocol) => {
      const read = protocols[protocol]!();
      const lists = await Promise.all(Array.from({ length: 4 }, () => pageThrough(read)));
      for (const ids of lists) {
        expect(ids).toHaveLength(DEFINITIONS);
        expect(new Set(ids).size).toBe(DEFINITIONS);
      }
      // Still serving: the process survived the lists.
      expect(server.child.exitCode).toBeNull();
      expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200);
    },
  );
});
