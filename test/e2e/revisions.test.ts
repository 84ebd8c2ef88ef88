/**
 * Revisions on every surface (issue 20, item 1): `meta.modRevision` in every
 * definition, a list's `revision` in its body, and the `X-Registry-Revision`
 * header on lists and gets, over REST, gRPC (@grpc/grpc-js, response
 * metadata) and Connect, each against a real server.
 */
import { create, type Message } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { beforeAll, describe, expect, it } from "vitest";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  GetAgentDefinitionRequestSchema,
  ListAgentDefinitionsRequestSchema,
  type ListAgentDefinitionsResponse,
  ListAgentDefinitionVersionsRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { withAuthorization } from "../support/auth.js";
import { forEachDatabase } from "../support/databases.js";
import { exampleDefinition } from "../support/definitions.js";
import { grpcJsServiceDefinition } from "../support/grpc-js-client.js";
import { useServer } from "../support/server.js";

const T = "/api/asor/v1/default/agentDefinition";
const C = "/asor/v1/agentDefinition";
const HEADER = "x-registry-revision";

forEachDatabase((db) => {
  const server = useServer(db);
  const json = { "content-type": "application/json" };

  const rest = (path: string, init: RequestInit = {}) =>
    fetch(`${server().baseUrl}${path}`, {
      ...init,
      headers: { authorization: server().authorization, ...(init.headers as Record<string, string>) },
    });
  const post = async (def: unknown) => {
    const res = await rest(T, { method: "POST", headers: json, body: JSON.stringify(def) });
    expect(res.status, await res.clone().text()).toBe(201);
    return (await res.json()) as { id: string; reference_id: string; meta: Record<string, unknown> };
  };
  /** The tenant's revision now, as a list answers it. */
  const revisionNow = async () =>
    Number(((await (await rest(`${T}?limit=1`)).json()) as { revision: string }).revision);

  /** A unary gRPC call that answers the response and its header metadata. */
  const grpcCall = <O extends Message>(method: string, request: Message) => {
    const Client = grpc.makeGenericClientConstructor(grpcJsServiceDefinition(AgentDefinitionService), "Registry");
    const client = new Client(`127.0.0.1:${server().port}`, grpc.credentials.createInsecure()) as unknown as Record<
      string,
      (req: Message, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res: O) => void) => grpc.ClientUnaryCall
    > &
      grpc.Client;
    const metadata = new grpc.Metadata();
    metadata.set("authorization", server().authorization);
    return new Promise<{ response: O; header: grpc.Metadata }>((resolve, reject) => {
      let header = new grpc.Metadata();
      const fn = client[method];
      if (fn === undefined) throw new Error(`no method ${method}`);
      const call = fn.call(client, request, metadata, (err, response) => {
        client.close();
        if (err) reject(err);
        else resolve({ response, header });
      });
      call.on("metadata", (m: grpc.Metadata) => {
        header = m;
      });
    });
  };

  let first: { id: string; reference_id: string; meta: Record<string, unknown> };
  let start: number;

  beforeAll(async () => {
    start = await revisionNow();
    first = await post({ ...exampleDefinition(), name: "Revision Agent", externalAgentID: "ext-revisions" });
  });

  describe("REST", () => {
    it("carries the revision that last changed a definition in meta.modRevision, an int64 as a string", async () => {
      expect(first.meta.modRevision).toBe(String(start + 1));
      const updated = await post({
        ...exampleDefinition(),
        name: "Revision Agent",
        externalAgentID: "ext-revisions",
        description: "Changed",
      });
      expect(updated.id).toBe(first.id);
      expect(Number(updated.meta.modRevision)).toBeGreaterThan(start + 1);
    });

    it.each([
      ["the reference text's path", T],
      ["the contract's path", C],
    ])("answers a list's revision in its body and header, and a get's in its header (%s)", async (_, base) => {
      const now = await revisionNow();
      const list = await rest(`${base}?limit=2`);
      expect(list.headers.get(HEADER)).toBe(String(now));
      const body = (await list.json()) as { revision: string; data: Array<{ meta: { modRevision: string } }> };
      expect(body.revision).toBe(String(now));
      for (const d of body.data) expect(Number(d.meta.modRevision)).toBeLessThanOrEqual(now);

      const get = await rest(`${base}/${first.id}`);
      expect(get.status).toBe(200);
      expect(get.headers.get(HEADER)).toBe(String(now));
      const byReference = await rest(`${base}/${encodeURIComponent(first.reference_id)}`);
      expect(byReference.headers.get(HEADER)).toBe(String(now));
      const versions = await rest(`${base}/${first.id}/versions`);
      expect(versions.headers.get(HEADER)).toBe(String(now));
      expect(((await versions.json()) as { revision: string }).revision).toBe(String(now));
    });

    it("answers a later revision after a write, and the written definition's modRevision is it", async () => {
      const before = await revisionNow();
      const added = await post({ ...exampleDefinition(), name: "Revision Later", externalAgentID: "ext-later" });
      expect(added.meta.modRevision).toBe(String(before + 1));
      const get = await rest(`${T}/${added.id}`);
      expect(get.headers.get(HEADER)).toBe(String(before + 1));
      expect(((await get.json()) as { meta: { modRevision: string } }).meta.modRevision).toBe(String(before + 1));
    });
  });

  describe("RPC", () => {
    it("answers the list's revision as a field and as header metadata over gRPC, and a get's as metadata", async () => {
      const now = await revisionNow();
      const list = await grpcCall<ListAgentDefinitionsResponse>(
        "listAgentDefinitions",
        create(ListAgentDefinitionsRequestSchema, { limit: 5 }),
      );
      expect(list.response.revision).toBe(BigInt(now));
      expect(list.header.get(HEADER)).toEqual([String(now)]);
      for (const d of list.response.data) expect(d.meta?.modRevision).toBeGreaterThan(0n);

      const get = await grpcCall<AgentDefinition>(
        "getAgentDefinition",
        create(GetAgentDefinitionRequestSchema, { id: first.id }),
      );
      expect(get.header.get(HEADER)).toEqual([String(now)]);
      const rest = (await await fetch(`${server().baseUrl}${T}/${first.id}`, {
        headers: { authorization: server().authorization },
      }).then((r) => r.json())) as { meta: { modRevision: string } };
      expect(get.response.meta?.modRevision).toBe(BigInt(rest.meta.modRevision));
    });

    it("answers the same over Connect (JSON and binary), the list's revision in its body and header", async () => {
      const now = await revisionNow();
      for (const useBinaryFormat of [false, true]) {
        const client = createClient(
          AgentDefinitionService,
          createConnectTransport({
            baseUrl: server().baseUrl,
            httpVersion: "1.1",
            useBinaryFormat,
            interceptors: [withAuthorization(server().authorization)],
          }),
        );
        let listHeaders: Headers | undefined;
        const list = await client.listAgentDefinitions({ limit: 3 }, { onHeader: (h) => (listHeaders = h) });
        expect(list.revision).toBe(BigInt(now));
        expect(listHeaders?.get(HEADER)).toBe(String(now));
        let getHeaders: Headers | undefined;
        const got = await client.getAgentDefinition({ id: first.id }, { onHeader: (h) => (getHeaders = h) });
        expect(getHeaders?.get(HEADER)).toBe(String(now));
        expect(got.meta?.modRevision).toBeGreaterThan(0n);
        const versions = await client.listAgentDefinitionVersions(
          create(ListAgentDefinitionVersionsRequestSchema, { id: first.id }),
        );
        expect(versions.revision).toBe(BigInt(now));
      }
    });
  });
});
