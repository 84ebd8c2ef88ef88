/**
 * A tenant's AI Catalog (issue 45, item 2), on both runtimes and both databases. The members it checks are the
 * ones AI Catalog v0.9's CDDL requires (Agent-Card/ai-catalog `specification/ai-catalog.md`, "AICatalog" and
 * "CatalogEntry": `specVersion`, `entries`; each entry's `identifier`, `type`, and exactly one of `url` / `data`;
 * `publisher` with `identifier` and `displayName` when present; `updatedAt` a date-time), and its rules for an
 * operator's entries: a publisher's `urn:air:` identifier kept, otherwise one of the operator's own that stays the
 * same across versions.
 */
import { beforeAll, expect, it } from "vitest";
import { minimalDefinition } from "../support/definitions.js";
import { forEachRuntimeAndDatabase, useServerUnder } from "../support/runtimes.js";

interface Entry {
  identifier: string;
  type: string;
  url?: string;
  data?: unknown;
  publisher?: { identifier: string; displayName: string };
  updatedAt?: string;
  [member: string]: unknown;
}
interface Catalog {
  specVersion: string;
  host?: { displayName: string; identifier?: string };
  entries: Entry[];
}

forEachRuntimeAndDatabase((db, runtime) => {
  const server = useServerUnder(runtime, db);
  const tenant = "catalogs";
  let authorization = "";
  const references = new Map<string, string>();

  const post = async (name: string, version: string, extra: Record<string, unknown> = {}) => {
    const res = await fetch(`${server().baseUrl}/api/asor/v1/${tenant}/agentDefinition`, {
      method: "POST",
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify(minimalDefinition({ name, version, ...extra })),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    const { id, reference_id } = (await res.json()) as { id: string; reference_id: string };
    references.set(name, reference_id.replace(/^Agent_ID=/, ""));
    return id;
  };
  const setStatus = async (id: string, status: string) => {
    const res = await fetch(`${server().baseUrl}/api/asor/v1/${tenant}/agentDefinition/${id}/status`, {
      method: "PATCH",
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify({ status }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
  };
  const catalog = async (): Promise<Catalog> => {
    const res = await fetch(`${server().baseUrl}/api/asor/v1/${tenant}/.well-known/ai-catalog.json`, {
      headers: { authorization },
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/ai-catalog+json");
    return (await res.json()) as Catalog;
  };

  beforeAll(async () => {
    const created = await fetch(`${server().baseUrl}/asor/v1/admin/tenants`, {
      method: "POST",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify({ name: tenant, sequencePrefix: "C-" }),
    });
    expect(created.status, await created.clone().text()).toBe(201);
    authorization = await server().bearer({ tenant });
    await post("Weather Oracle", "1.0.0");
    await post("Weather Oracle", "1.1.0");
    await post("Published Agent", "1.0.0", { externalAgentID: "urn:air:acme.example:agents:published" });
    await setStatus(await post("Retired Agent", "1.0.0"), "DEPRECATED");
  });

  it("has the members AI Catalog requires, one entry per agent with an ACTIVE version", async () => {
    const document = await catalog();
    expect(document.specVersion).toBe("0.9");
    expect(document.host?.displayName).toEqual(expect.any(String));
    expect(document.entries).toHaveLength(2);
    for (const entry of document.entries) {
      expect(entry.identifier).toEqual(expect.any(String));
      expect(entry.type).toBe("application/a2a-agent-card+json");
      expect([entry.url, entry.data].filter((v) => v !== undefined)).toHaveLength(1);
      expect(new Date(entry.updatedAt ?? "").toISOString()).toBe(entry.updatedAt);
      expect(entry.publisher).toEqual({
        identifier: expect.stringMatching(/^Provider=/),
        displayName: expect.any(String),
      });
      // The card carries these: the specification asks them left out of the entry.
      for (const member of ["displayName", "description", "version"]) expect(entry).not.toHaveProperty(member);
    }
    const identifiers = document.entries.map((e) => e.identifier);
    expect(identifiers).toEqual([
      `urn:asor:agent:${tenant}:${references.get("Weather Oracle")}`,
      "urn:air:acme.example:agents:published",
    ]);
  });

  it("points each entry at its agent's card, the newest ACTIVE version's", async () => {
    const [weather] = (await catalog()).entries;
    expect(weather?.url).toBe(
      `${server().baseUrl}/a2a/${tenant}/${references.get("Weather Oracle")}/.well-known/agent-card.json`,
    );
    const card = await fetch(weather?.url ?? "", { headers: { authorization } });
    expect(card.status).toBe(200);
    expect(((await card.json()) as { version: string }).version).toBe("1.1.0");
  });

  it("keeps an agent's identifier across its versions, and drops an agent once none is ACTIVE", async () => {
    const before = (await catalog()).entries.map((e) => e.identifier);
    const id = await post("Weather Oracle", "1.2.0");
    expect((await catalog()).entries.map((e) => e.identifier)).toEqual(before);
    await setStatus(`Agent_ID=${references.get("Weather Oracle")}`, "DEPRECATED");
    expect((await catalog()).entries.map((e) => e.identifier)).toEqual(["urn:air:acme.example:agents:published"]);
    await setStatus(id, "ACTIVE");
    expect((await catalog()).entries.map((e) => e.identifier)).toEqual(before);
  });

  it("serves the caller's tenant's at /.well-known/ai-catalog.json, and keeps tenants apart", async () => {
    const res = await fetch(`${server().baseUrl}/.well-known/ai-catalog.json`, { headers: { authorization } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as Catalog).entries.map((e) => e.identifier)).toEqual(
      (await catalog()).entries.map((e) => e.identifier),
    );
    const other = await server().bearer({ tenant: "default" });
    const refused = await fetch(`${server().baseUrl}/api/asor/v1/${tenant}/.well-known/ai-catalog.json`, {
      headers: { authorization: other },
    });
    expect(refused.status).toBe(403);
  });
});
