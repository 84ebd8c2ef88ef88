/**
 * Liveness and drift (issue 44) against a real server on each database, under Node and under Deno, probing real
 * A2A agents on loopback (@a2a-js/sdk's card handler; PROBE_ALLOW opens 127.0.0.0/8) every second: each agent
 * reaches its state and drift, with one LIVENESS_CHANGED event per change and none while nothing changes; the
 * on-demand probe; the list's filters; and the address guard, with an agent the prober may not reach.
 */
import { afterAll, describe, expect, it } from "vitest";
import packageJson from "../../package.json" with { type: "json" };
import { cardAgent, closedPortUrl, largeAgent, silentAgent, type TestAgent } from "../support/a2a-agents.js";
import { minimalDefinition } from "../support/definitions.js";
import { forEachRuntimeAndDatabase, type ReachableServer, useServerUnder } from "../support/runtimes.js";

const INTERVAL_MS = 1_000;
const ENV = {
  PROBE_ENABLED: "true",
  PROBE_ALLOW: "127.0.0.0/8",
  PROBE_INTERVAL_MS: String(INTERVAL_MS),
  PROBE_TIMEOUT_MS: "500",
};
const BASE = "/api/asor/v1/default/agentDefinition";

interface Liveness {
  state: string;
  drift?: string;
  driftPaths?: { path: string; kind: string }[];
  failure?: string;
  consecutiveFailures?: number;
  httpStatus?: number;
  previousState?: string;
}
type Definition = Record<string, any> & { id: string; meta: { liveness: Liveness; modRevision: string } };

/** The JSON answer of `method path` on `server`, with a token of every domain. */
async function call(server: ReachableServer, method: string, path: string, body?: unknown) {
  const res = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: {
      authorization: server.authorization,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as any };
}

/** What `attempt` answers once it answers something, tried every 100 ms for `ms`. */
async function eventually<T>(attempt: () => Promise<T | undefined>, what: () => string, ms = 15_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const found = await attempt();
    if (found !== undefined) return found;
    if (Date.now() > until) throw new Error(`not within ${ms} ms: ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Every event of the tenant after `since`, read from the watch up to its bookmark: their type and id. */
async function eventsSince(server: ReachableServer, since: string): Promise<{ type: string; id: string }[]> {
  const abort = new AbortController();
  const res = await fetch(`${server.baseUrl}/api/asor/v1/default/agentDefinitionEvents?since=${since}&bookmark=true`, {
    headers: { authorization: server.authorization, accept: "text/event-stream" },
    signal: abort.signal,
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const events: { type: string; id: string }[] = [];
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return events;
      text += decoder.decode(value, { stream: true });
      for (let end = text.indexOf("\n\n"); end !== -1; end = text.indexOf("\n\n")) {
        const data = text
          .slice(0, end)
          .split("\n")
          .find((line) => line.startsWith("data: "));
        text = text.slice(end + 2);
        if (data === undefined) continue;
        const event = JSON.parse(data.slice(6)) as { type: string; definition?: { id: string } };
        if (event.type === "BOOKMARK") return events;
        events.push({ type: event.type, id: event.definition?.id ?? "" });
      }
    }
  } finally {
    abort.abort();
  }
}

forEachRuntimeAndDatabase((db, runtime) => {
  const server = useServerUnder(runtime, db, ENV);
  const agents: TestAgent[] = [];
  afterAll(async () => {
    for (const agent of agents) await agent.close();
  });
  const register = async (name: string, url: string): Promise<Definition> => {
    const skills = [
      { id: "s1", name: "Skill one", description: "The one thing" },
      { id: "s2", name: "Skill two", description: "The other thing" },
    ];
    const created = await call(server(), "POST", BASE, minimalDefinition({ name: `Live ${name}`, url, skills }));
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    // Registering never probes in the request.
    expect(created.body.meta.liveness).toEqual({ state: "NOT_PROBED" });
    return created.body;
  };
  const read = async (id: string): Promise<Definition> => (await call(server(), "GET", `${BASE}/${id}`)).body;
  /** The definition once its liveness is `state` with `drift`. */
  const reaches = (id: string, state: string, drift?: string) =>
    eventually(
      async () => {
        const found = await read(id);
        return found.meta.liveness.state === state && found.meta.liveness.drift === drift ? found : undefined;
      },
      () => `${id} to be ${state} ${drift ?? ""}`,
    );

  /** Cards by agent, set once the registry has rendered them (an agent answers 503 until then). */
  const cards = new Map<string, Record<string, unknown>>();
  const served = (name: string) => () => cards.get(name);
  let defs: Record<string, Definition> = {};
  let since = "0";

  it("brings each agent to its state and drift, with one event per change and none while nothing changes", async () => {
    since = (await call(server(), "GET", `${BASE}?limit=1`)).body.revision;
    const [matching, missing, extra] = [
      await cardAgent(served("matching")),
      await cardAgent(served("missing")),
      await cardAgent(served("extra")),
    ];
    const silent = await silentAgent();
    const large = await largeAgent(5 * 1024 * 1024);
    agents.push(matching, missing, extra, silent, large);
    const urls = {
      matching: matching.url,
      missing: missing.url,
      extra: extra.url,
      silent: silent.url,
      large: large.url,
    };
    defs = {};
    for (const [name, url] of Object.entries({ ...urls, closed: await closedPortUrl() }))
      defs[name] = await register(`${runtime} ${name}`, url);
    for (const name of ["matching", "missing", "extra"]) {
      const card = (await call(server(), "GET", `${BASE}/${defs[name]!.id}/agentCard`)).body;
      const skills = card.skills as Record<string, unknown>[];
      if (name === "missing") card.skills = skills.filter((s) => s.id !== "s2");
      if (name === "extra") card.skills = [...skills, { id: "extra", name: "Extra", description: "More", tags: [] }];
      cards.set(name, card);
    }
    const up = await reaches(defs.matching!.id, "UP", "NONE");
    expect(up.meta.liveness).toMatchObject({ httpStatus: 200, previousState: "NOT_PROBED" });
    const breaking = await reaches(defs.missing!.id, "UP", "BREAKING");
    expect(breaking.meta.liveness.driftPaths).toEqual([{ path: "skills[id=s2]", kind: "BREAKING" }]);
    const compatible = await reaches(defs.extra!.id, "UP", "COMPATIBLE");
    expect(compatible.meta.liveness.driftPaths).toEqual([{ path: "skills[id=extra]", kind: "COMPATIBLE" }]);
    for (const [name, failure] of [
      ["closed", "REFUSED"],
      ["silent", "TIMEOUT"],
      ["large", "TOO_LARGE"],
    ] as const) {
      const down = await reaches(defs[name]!.id, "DOWN");
      expect(down.meta.liveness, name).toMatchObject({ failure, consecutiveFailures: 2, previousState: "NOT_PROBED" });
    }
    // Two intervals more: every agent is probed again, and nothing changes, so nothing more is written.
    const before = new Map(agents.map((a) => [a, a.requests]));
    await new Promise((resolve) => setTimeout(resolve, 2.5 * INTERVAL_MS));
    for (const agent of agents) expect(agent.requests).toBeGreaterThan(before.get(agent)!);
    const events = await eventsSince(server(), since);
    for (const [name, def] of Object.entries(defs)) {
      const changes = events.filter((e) => e.id === def.id && e.type === "LIVENESS_CHANGED");
      expect(changes.length, `${name}: ${JSON.stringify(events)}`).toBe(1);
    }
    // Each probe of an agent is one request of its card: no more than one an interval (jitter aside), and
    // registering none; each names the registry.
    expect(matching.requests).toBeLessThan(15);
    expect([...matching.userAgents!]).toEqual([`agent-definition-registry/${packageJson.version} (+liveness probe)`]);
  }, 60_000);

  it("probes on demand, answering the version with its liveness after the probe", async () => {
    const id = defs.matching!.id;
    const probed = await call(server(), "POST", `${BASE}/${id}/probe`);
    expect(probed.status, JSON.stringify(probed.body)).toBe(200);
    expect(probed.body.meta.liveness).toMatchObject({ state: "UP", drift: "NONE" });
    // The same over Connect (the RPC), and the contract's path without a tenant.
    const rpc = await fetch(`${server().baseUrl}/asor.v1.AgentDefinitionService/ProbeAgentDefinition`, {
      method: "POST",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify({ id: defs.silent!.id }),
    });
    expect(rpc.status).toBe(200);
    expect(((await rpc.json()) as Definition).meta.liveness).toMatchObject({ state: "DOWN", failure: "TIMEOUT" });
    expect((await call(server(), "POST", `/asor/v1/agentDefinition/${id}/probe`)).status).toBe(200);
    expect((await call(server(), "POST", `${BASE}/${"0".repeat(32)}/probe`)).status).toBe(404);
    expect((await call(server(), "POST", `${BASE}/not-an-id/probe`)).status).toBe(400);
  });

  it("filters the list by liveness and drift", async () => {
    const ids = async (query: string) =>
      new Set(((await call(server(), "GET", `${BASE}?limit=100&${query}`)).body.data as Definition[]).map((d) => d.id));
    expect(await ids("liveness=DOWN")).toEqual(new Set([defs.closed!.id, defs.silent!.id, defs.large!.id]));
    expect(await ids("drift=BREAKING")).toEqual(new Set([defs.missing!.id]));
    expect(await ids("drift=COMPATIBLE&drift=BREAKING")).toEqual(new Set([defs.missing!.id, defs.extra!.id]));
    expect(await ids("liveness=UP&drift=NONE")).toEqual(new Set([defs.matching!.id]));
    expect((await call(server(), "GET", `${BASE}?liveness=SIDEWAYS`)).status).toBe(400);
  });

  describe("with PROBE_ALLOW=127.0.0.2/32", () => {
    const guarded = useServerUnder(runtime, db, { ...ENV, PROBE_ALLOW: "127.0.0.2/32" });

    it("sends no request to an agent on 127.0.0.3, whose definition reads a refused address", async () => {
      const agent = await cardAgent(() => ({ name: "never asked" }), "127.0.0.3");
      agents.push(agent);
      const created = await call(
        guarded(),
        "POST",
        BASE,
        minimalDefinition({ name: `Guarded ${runtime}`, url: agent.url }),
      );
      expect(created.status).toBe(201);
      const down = await eventually(
        async () => {
          const found = (await call(guarded(), "GET", `${BASE}/${created.body.id}`)).body as Definition;
          return found.meta.liveness.state === "DOWN" ? found : undefined;
        },
        () => "the guarded agent to be DOWN",
      );
      expect(down.meta.liveness).toMatchObject({ failure: "BLOCKED_ADDRESS", consecutiveFailures: 2 });
      expect(agent.requests).toBe(0);
    }, 30_000);
  });
});
