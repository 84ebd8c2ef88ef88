/**
 * An agent's A2A base URL in the registry, `/a2a/{tenant}/{agent}/` (issue 45, item 1): @a2a-js/sdk's own card
 * resolver, given it, reads the card of the agent's newest ACTIVE version; a deprecated version after it is
 * passed over, an agent with no ACTIVE version has none. On both runtimes and both databases, over REST (the
 * resolver) and gRPC-Web (the same RPC).
 */

import { DefaultAgentCardResolver } from "@a2a-js/sdk/client";
import { createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-node";
import { beforeAll, expect, it } from "vitest";
import { AgentDefinitionService } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { minimalDefinition } from "../support/definitions.js";
import { forEachRuntimeAndDatabase, useServerUnder } from "../support/runtimes.js";

forEachRuntimeAndDatabase((db, runtime) => {
  const server = useServerUnder(runtime, db);
  const tenant = "basecards";
  let authorization = "";
  /** An agent's reference (`B-1`) by name, once written. */
  const agents = new Map<string, string>();

  const post = async (name: string, version: string) => {
    const res = await fetch(`${server().baseUrl}/api/asor/v1/${tenant}/agentDefinition`, {
      method: "POST",
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify(minimalDefinition({ name, version, description: `${name} ${version}` })),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    const { id, reference_id } = (await res.json()) as { id: string; reference_id: string };
    agents.set(name, reference_id.replace(/^Agent_ID=/, ""));
    return id;
  };
  const deprecate = async (id: string) => {
    const res = await fetch(`${server().baseUrl}/api/asor/v1/${tenant}/agentDefinition/${id}/status`, {
      method: "PATCH",
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify({ status: "DEPRECATED" }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
  };
  /** a2a-js's resolver, sending the caller's token. */
  const resolver = () =>
    new DefaultAgentCardResolver({
      fetchImpl: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization } }),
    });

  beforeAll(async () => {
    const created = await fetch(`${server().baseUrl}/asor/v1/admin/tenants`, {
      method: "POST",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify({ name: tenant, sequencePrefix: "B-" }),
    });
    expect(created.status, await created.clone().text()).toBe(201);
    authorization = await server().bearer({ tenant });
    await post("Weather Oracle", "1.0.0");
    await post("Weather Oracle", "1.1.0");
    await deprecate(await post("Weather Oracle", "2.0.0-beta"));
    await deprecate(await post("Retired Agent", "1.0.0"));
  });

  it("gives a2a-js's resolver the newest ACTIVE version's card at the base URL with its trailing slash", async () => {
    const agent = agents.get("Weather Oracle");
    const card = await resolver().resolve(`${server().baseUrl}/a2a/${tenant}/${agent}/`);
    expect(card.name).toBe("Weather Oracle");
    expect(card.version).toBe("1.1.0");
  });

  it("answers the base URL itself and Agent_ID= the same, with the card's ETag and 304", async () => {
    const agent = agents.get("Weather Oracle");
    const wellKnown = await fetch(`${server().baseUrl}/a2a/${tenant}/${agent}/.well-known/agent-card.json`, {
      headers: { authorization },
    });
    expect(wellKnown.status).toBe(200);
    const etag = wellKnown.headers.get("etag") ?? "";
    expect(etag).toMatch(/^"card/);
    const body = await wellKnown.json();
    for (const path of [`/a2a/${tenant}/${agent}`, `/a2a/${tenant}/Agent_ID=${agent}/.well-known/agent-card.json`]) {
      const res = await fetch(`${server().baseUrl}${path}`, { headers: { authorization } });
      expect(res.status, path).toBe(200);
      expect(await res.json()).toEqual(body);
    }
    const again = await fetch(`${server().baseUrl}/a2a/${tenant}/${agent}/.well-known/agent-card.json`, {
      headers: { authorization, "if-none-match": etag },
    });
    expect(again.status).toBe(304);
  });

  it("has no card for an agent without an ACTIVE version, nor for one that does not exist", async () => {
    for (const agent of [agents.get("Retired Agent"), "B-999", "not an agent"]) {
      const res = await fetch(`${server().baseUrl}/a2a/${tenant}/${encodeURIComponent(agent ?? "")}`, {
        headers: { authorization },
      });
      expect(res.status, agent).toBe(404);
      expect(((await res.json()) as { errors: { field?: string }[] }).errors[0]?.field).toBe("agent");
    }
    await expect(
      resolver().resolve(`${server().baseUrl}/a2a/${tenant}/${agents.get("Retired Agent")}/`),
    ).rejects.toThrow(/404/);
  });

  it("answers the same card over gRPC-Web, and keeps tenants apart", async () => {
    const client = createClient(
      AgentDefinitionService,
      createGrpcWebTransport({ baseUrl: server().baseUrl, httpVersion: "1.1" }),
    );
    const agent = agents.get("Weather Oracle") ?? "";
    const card = await client.getAgentBaseCard({ tenant, agent }, { headers: { authorization } });
    expect(card.version).toBe("1.1.0");
    const other = await server().bearer({ tenant: "default" });
    const res = await fetch(`${server().baseUrl}/a2a/${tenant}/${agent}`, { headers: { authorization: other } });
    expect(res.status).toBe(403);
  });
});
