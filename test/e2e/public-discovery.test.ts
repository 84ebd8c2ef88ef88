/**
 * A tenant's discovery made public (issue 45, item 5): with `{"discovery": "PUBLIC"}` its agents' cards at their
 * A2A base URLs and its AI Catalog answer without a token (only ACTIVE agents are there); with the default
 * (`TOKEN`), as for an unknown tenant, a caller without a token gets 401. Nothing else opens: the lists, the
 * definitions and other tenants still need a token. On both runtimes and both databases.
 */
import { DefaultAgentCardResolver } from "@a2a-js/sdk/client";
import { beforeAll, expect, it } from "vitest";
import { minimalDefinition } from "../support/definitions.js";
import { forEachRuntimeAndDatabase, useServerUnder } from "../support/runtimes.js";

forEachRuntimeAndDatabase((db, runtime) => {
  const server = useServerUnder(runtime, db);
  const open = "opendisco";
  const closed = "closeddisco";
  const agents = new Map<string, string>();

  const setUp = async (tenant: string, prefix: string) => {
    const created = await fetch(`${server().baseUrl}/asor/v1/admin/tenants`, {
      method: "POST",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify({ name: tenant, sequencePrefix: prefix }),
    });
    expect(created.status, await created.clone().text()).toBe(201);
    const res = await fetch(`${server().baseUrl}/api/asor/v1/${tenant}/agentDefinition`, {
      method: "POST",
      headers: { authorization: await server().bearer({ tenant }), "content-type": "application/json" },
      body: JSON.stringify(minimalDefinition({ name: `${tenant} agent` })),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    agents.set(tenant, ((await res.json()) as { reference_id: string }).reference_id.replace("Agent_ID=", ""));
  };
  const anonymous = (path: string) => fetch(`${server().baseUrl}${path}`);

  beforeAll(async () => {
    await setUp(open, "O-");
    await setUp(closed, "X-");
    const res = await fetch(`${server().baseUrl}/asor/v1/admin/tenants/${open}`, {
      method: "PATCH",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify({ discovery: "PUBLIC" }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(((await res.json()) as { settings: { discovery: string } }).settings.discovery).toBe("PUBLIC");
  });

  it("answers a public tenant's catalog and cards without a token, to a2a-js's resolver too", async () => {
    const catalog = await anonymous(`/api/asor/v1/${open}/.well-known/ai-catalog.json`);
    expect(catalog.status).toBe(200);
    const { entries } = (await catalog.json()) as { entries: { url: string }[] };
    expect(entries).toHaveLength(1);
    const card = await anonymous(new URL(entries[0]?.url ?? "").pathname);
    expect(card.status).toBe(200);
    const resolved = await new DefaultAgentCardResolver().resolve(
      `${server().baseUrl}/a2a/${open}/${agents.get(open)}/`,
    );
    expect(resolved.name).toBe(`${open} agent`);
  });

  it("refuses a caller without a token everywhere else: a tenant not public, an unknown one, the API", async () => {
    for (const path of [
      `/api/asor/v1/${closed}/.well-known/ai-catalog.json`,
      `/a2a/${closed}/${agents.get(closed)}/.well-known/agent-card.json`,
      "/api/asor/v1/nowhere/.well-known/ai-catalog.json",
      `/api/asor/v1/${open}/agentDefinition`,
      `/api/asor/v1/${open}/agentDefinition/Agent_ID=${agents.get(open)}`,
    ]) {
      const res = await anonymous(path);
      expect(res.status, path).toBe(401);
      expect(res.headers.get("www-authenticate"), path).toMatch(/^Bearer/);
    }
  });

  it("still refuses a bad token to a public tenant, and another tenant's token to it", async () => {
    const path = `/api/asor/v1/${open}/.well-known/ai-catalog.json`;
    expect((await fetch(`${server().baseUrl}${path}`, { headers: { authorization: "Bearer nope" } })).status).toBe(401);
    const other = await server().bearer({ tenant: closed });
    expect((await fetch(`${server().baseUrl}${path}`, { headers: { authorization: other } })).status).toBe(403);
  });

  it("closes again when the setting goes back to TOKEN", async () => {
    const res = await fetch(`${server().baseUrl}/asor/v1/admin/tenants/${open}`, {
      method: "PATCH",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify({ discovery: "TOKEN" }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect((await anonymous(`/api/asor/v1/${open}/.well-known/ai-catalog.json`)).status).toBe(401);
    const back = await fetch(`${server().baseUrl}/asor/v1/admin/tenants/${open}`, {
      method: "PATCH",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify({ discovery: "PUBLIC" }),
    });
    expect(back.status).toBe(200);
  });
});
