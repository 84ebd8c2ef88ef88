/**
 * MCP at `/mcp` (issue 45, item 4), with the official SDK's client over Streamable HTTP against the registry's
 * server, on both runtimes and both databases: initialize, the four tools with their schemas, each called, the
 * results equal to what REST answers; a refused call as a tool error in the spec's error shape; a caller without
 * a token told where to get one (401, RFC 9728 metadata); tenants apart.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { beforeAll, describe, expect, it } from "vitest";
import packageJson from "../../package.json" with { type: "json" };
import { minimalDefinition } from "../support/definitions.js";
import { forEachRuntimeAndDatabase, useServerUnder } from "../support/runtimes.js";

/** An MCP client of the registry at `baseUrl` with `authorization`, connected (initialize done). */
async function mcpClient(baseUrl: string, authorization: string): Promise<Client> {
  const client = new Client({ name: "registry-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), {
    requestInit: { headers: { authorization } },
  });
  await client.connect(transport);
  return client;
}

type ToolResult = Awaited<ReturnType<Client["callTool"]>>;
const textOf = (result: ToolResult) => (result.content as { type: string; text: string }[])[0]?.text ?? "";

forEachRuntimeAndDatabase((db, runtime) => {
  const server = useServerUnder(runtime, db);
  let tenant = "";
  let authorization = "";
  let ids: string[] = [];

  beforeAll(async () => {
    tenant = `mcp${runtime}${db.name}`.replace(/[^A-Za-z0-9]/g, "");
    const created = await fetch(`${server().baseUrl}/asor/v1/admin/tenants`, {
      method: "POST",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify({ name: tenant, sequencePrefix: "M-" }),
    });
    expect(created.status, await created.clone().text()).toBe(201);
    authorization = await server().bearer({ tenant });
    ids = [];
    for (const [name, version] of [
      ["Weather Oracle", "1.0.0"],
      ["Weather Oracle", "1.1.0"],
      ["Recipe Finder", "2.0.0"],
    ] as const) {
      const res = await fetch(`${server().baseUrl}/api/asor/v1/${tenant}/agentDefinition`, {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition({ name, version, description: `${name} finds things` })),
      });
      expect(res.status, await res.clone().text()).toBe(201);
      ids.push(((await res.json()) as { id: string }).id);
    }
  });

  const rest = async (path: string) => {
    const res = await fetch(`${server().baseUrl}/api/asor/v1/${tenant}${path}`, { headers: { authorization } });
    expect(res.status, await res.clone().text()).toBe(200);
    return res.json();
  };

  it("initializes and lists the four read-only tools, each with input and output schemas", async () => {
    const client = await mcpClient(server().baseUrl, authorization);
    expect(client.getServerVersion()?.name).toBe("agent-definition-registry");
    expect(client.getServerVersion()?.version).toBe(packageJson.version);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      "get_agent",
      "get_agent_card",
      "list_agent_versions",
      "search_agents",
    ]);
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe("object");
      expect(tool.outputSchema?.type).toBe("object");
      expect(tool.annotations?.readOnlyHint).toBe(true);
      expect(JSON.stringify(tool.inputSchema)).not.toContain('"tenant"');
    }
    const search = tools.find((t) => t.name === "search_agents");
    expect(Object.keys(search?.inputSchema.properties ?? {})).toEqual(
      expect.arrayContaining(["q", "provider", "limit"]),
    );
    await client.close();
  });

  it("answers each tool with what REST answers for the same request", async () => {
    const client = await mcpClient(server().baseUrl, authorization);
    const searched = await client.callTool({ name: "search_agents", arguments: { q: "weather", limit: 10 } });
    expect(searched.isError).toBeFalsy();
    const restSearch = (await rest("/agentDefinition?q=weather&limit=10")) as { total: number; data: unknown[] };
    expect(searched.structuredContent).toEqual(restSearch);
    expect(restSearch.total).toBe(2);
    expect(JSON.parse(textOf(searched))).toEqual(restSearch);

    const got = await client.callTool({ name: "get_agent", arguments: { id: ids[2] } });
    expect(got.structuredContent).toEqual(await rest(`/agentDefinition/${ids[2]}`));
    const card = await client.callTool({ name: "get_agent_card", arguments: { id: ids[0] } });
    expect(card.structuredContent).toEqual(await rest(`/agentDefinition/${ids[0]}/agentCard`));
    expect(card.structuredContent).toMatchObject({ name: "Weather Oracle", version: "1.0.0" });
    const versions = await client.callTool({ name: "list_agent_versions", arguments: { id: ids[1] } });
    const restVersions = (await rest(`/agentDefinition/${ids[1]}/versions`)) as { data: unknown[] };
    expect(versions.structuredContent).toEqual(restVersions);
    expect(restVersions.data).toHaveLength(2);
    await client.close();
  });

  it("answers a refused or invalid call as a tool error in the spec's error shape, naming the member", async () => {
    const client = await mcpClient(server().baseUrl, authorization);
    const missing = await client.callTool({ name: "get_agent", arguments: { id: "0".repeat(32) } });
    expect(missing.isError).toBe(true);
    const restMissing = await fetch(`${server().baseUrl}/api/asor/v1/${tenant}/agentDefinition/${"0".repeat(32)}`, {
      headers: { authorization },
    });
    expect(restMissing.status).toBe(404);
    expect(JSON.parse(textOf(missing))).toEqual(await restMissing.json());
    const wrong = await client.callTool({ name: "search_agents", arguments: { limit: "ten", colour: "red" } });
    expect(wrong.isError).toBe(true);
    const body = JSON.parse(textOf(wrong)) as { errors: { code: string; path?: string; field?: string }[] };
    expect(body.errors.map((e) => [e.code, e.path ?? e.field])).toEqual(
      expect.arrayContaining([
        ["INVALID_TYPE", "limit"],
        ["UNKNOWN_FIELD", "colour"],
      ]),
    );
    const tenantArg = await client.callTool({ name: "search_agents", arguments: { tenant: "default" } });
    expect(tenantArg.isError).toBe(true);
    expect(textOf(tenantArg)).toContain("tenant");
    await client.close();
  });

  it("keeps tenants apart: another tenant's token finds none of these agents", async () => {
    const other = await server().bearer({ tenant: "default" });
    const client = await mcpClient(server().baseUrl, other);
    const searched = await client.callTool({ name: "search_agents", arguments: { q: "weather" } });
    expect((searched.structuredContent as { total: number }).total).toBe(0);
    const got = await client.callTool({ name: "get_agent", arguments: { id: ids[0] } });
    expect(got.isError).toBe(true);
    await client.close();
  });

  it("refuses a call without a token with 401 and the metadata's location, and serves the metadata", async () => {
    const res = await fetch(`${server().baseUrl}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(res.status).toBe(401);
    const challenge = res.headers.get("www-authenticate") ?? "";
    expect(challenge).toMatch(/^Bearer error="invalid_token"/);
    const metadataUrl = /resource_metadata="([^"]+)"/.exec(challenge)?.[1] ?? "";
    expect(metadataUrl).toBe(`${server().baseUrl}/.well-known/oauth-protected-resource/mcp`);
    const metadata = await fetch(metadataUrl);
    expect(metadata.status).toBe(200);
    expect(await metadata.json()).toMatchObject({
      resource: `${server().baseUrl}/mcp`,
      authorization_servers: [expect.any(String)],
      bearer_methods_supported: ["header"],
    });
    await expect(mcpClient(server().baseUrl, "Bearer not-a-token")).rejects.toThrow();
  });

  it("refuses a request from a page of another origin, and takes one from its own", async () => {
    const list = (origin: string) =>
      fetch(`${server().baseUrl}/mcp`, {
        method: "POST",
        headers: {
          authorization,
          origin,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
    expect((await list("http://evil.example")).status).toBe(403);
    const own = await list(server().baseUrl);
    expect(own.status).toBe(200);
    expect(((await own.json()) as { result: { tools: unknown[] } }).result.tools).toHaveLength(4);
  });

  it("answers GET and DELETE with 405: no server stream, no session", async () => {
    for (const method of ["GET", "DELETE"]) {
      const res = await fetch(`${server().baseUrl}/mcp`, { method, headers: { authorization } });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("POST");
    }
  });
});

describe("MCP's tool schemas", () => {
  it("are the contract's: every property of a tool's input is a member of its RPC's request", async () => {
    const { registryTools } = await import("../../src/surfaces/mcp/tools.js");
    for (const tool of registryTools()) {
      const members = tool.method.input.fields.map((f) => f.jsonName).filter((n) => n !== "tenant");
      expect(Object.keys(tool.inputSchema.properties as object).sort()).toEqual(members.sort());
    }
  });
});
