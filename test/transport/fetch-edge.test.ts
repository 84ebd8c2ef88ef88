import { describe, expect, it } from "vitest";
import { fetchEdge } from "../../src/edge/fetch-edge.js";
import { testDatabases } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { useServer } from "../support/server.js";

const LIST = "/asor.v1.AgentDefinitionService/ListAgentDefinitions";
const UPSERT = "/asor.v1.AgentDefinitionService/UpsertAgentDefinition";

describe("fetchEdge (the Deno entrypoint's handler, run here on Node's fetch types)", () => {
  const [sqlite] = testDatabases();
  const server = useServer(sqlite!);
  const handler = () => {
    const { app } = server();
    return fetchEdge(app.edge, app.requests);
  };
  const post = (path: string, contentType: string, body: BodyInit) =>
    new Request(`http://registry.test${path}`, { method: "POST", headers: { "content-type": contentType, authorization: server().authorization }, body });

  it("answers an RPC path over the Connect protocol", async () => {
    const upsert = await handler()(post(UPSERT, "application/json", JSON.stringify({ agentCardAndTools: minimalDefinition({ version: "fetch-adapter" }) })));
    expect(upsert.status).toBe(200);
    const created = await upsert.json();
    expect(created).toMatchObject({ id: expect.stringMatching(/^[0-9a-f]{32}$/), version: "fetch-adapter" });
    const list = await handler()(post(LIST, "application/json", JSON.stringify({ limit: 100 })));
    expect(list.status).toBe(200);
    expect((await list.json()).data.map((d: { id: string }) => d.id)).toContain(created.id);
  });

  it("answers an RPC path over gRPC-Web", async () => {
    const frame = new Uint8Array(5); // an empty ListAgentDefinitionsRequest: flags 0, length 0
    const response = await handler()(post(LIST, "application/grpc-web+proto", frame));
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/grpc-web+proto");
    const body = new Uint8Array(await response.arrayBuffer());
    // The last frame is the trailer frame (flag 0x80) with grpc-status 0.
    expect(new TextDecoder().decode(body)).toMatch(/grpc-status: ?0/);
  });

  it("refuses native gRPC, which needs the HTTP trailers fetch lacks, as UNIMPLEMENTED in the headers", async () => {
    for (const contentType of ["application/grpc", "application/grpc+proto", "application/grpc+json; charset=utf-8"]) {
      const response = await handler()(post(LIST, contentType, new Uint8Array(5)));
      // A gRPC "trailers-only" answer: the status travels in the headers, so no trailers are needed.
      expect(response.status).toBe(200);
      expect(response.headers.get("grpc-status")).toBe("12");
      expect(decodeURIComponent(response.headers.get("grpc-message") ?? "")).toMatch(/gRPC needs HTTP trailers/);
      expect((await response.arrayBuffer()).byteLength).toBe(0);
    }
  });

  it("serves every other path through the same edge (REST, and 404 outside the API)", async () => {
    const rest = await handler()(new Request("http://registry.test/api/asor/v1/default/agentDefinition?limit=1", { headers: { authorization: server().authorization } }));
    expect(rest.status).toBe(200);
    expect(await rest.json()).toMatchObject({ total: expect.any(Number), data: expect.any(Array) });
    const outside = await handler()(new Request("http://registry.test/nowhere"));
    expect(outside.status).toBe(404);
    expect(await outside.json()).toMatchObject({ errors: [{ code: "NOT_FOUND" }] });
  });
});
