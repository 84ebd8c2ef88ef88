/**
 * The prober's fetch of a live card, against real servers on loopback: an A2A agent served by @a2a-js/sdk's own
 * card handler, and plain HTTP servers for what a misbehaving agent does.
 */
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { AgentCard } from "@a2a-js/sdk";
import { agentCardHandler } from "@a2a-js/sdk/server/express";
import express from "express";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseProbeAllowance } from "../../src/probe/address-guard.js";
import { fetchLiveCard, liveCardUrl, type ProbeLimits } from "../../src/probe/live-card-fetch.js";

const limits = (over: Partial<ProbeLimits> = {}): ProbeLimits => ({
  timeoutMs: 2_000,
  maxBodyBytes: 256 * 1024,
  maxRedirects: 3,
  allowance: parseProbeAllowance("127.0.0.0/8"),
  userAgent: "agent-definition-registry-test/1 (probe)",
  ...over,
});

const card = (url: string): AgentCard =>
  ({
    name: "Recipe Agent",
    description: "Finds recipes",
    version: "1.0.0",
    supportedInterfaces: [{ url, protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
    capabilities: { streaming: true },
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: [{ id: "find", name: "Find", description: "Find a recipe", tags: ["cooking"] }],
  }) as unknown as AgentCard;

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A plain HTTP server on `host`, recording the requests it gets. */
async function plainServer(handler: Handler, host = "127.0.0.1") {
  const requests: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    requests.push(req);
    handler(req, res);
  });
  server.listen(0, host);
  await once(server, "listening");
  const base = `http://${host}:${(server.address() as AddressInfo).port}`;
  return { server, base, requests };
}

const closeAll = async (servers: Server[]) => {
  for (const s of servers) {
    s.closeAllConnections();
    s.close();
  }
};

describe("the prober's fetch of a live card", () => {
  const servers: Server[] = [];
  let agentUrl = "";
  const seen: IncomingMessage[] = [];

  beforeAll(async () => {
    const app = express();
    app.use((req, _res, next) => {
      seen.push(req);
      next();
    });
    const server = app.listen(0, "127.0.0.1");
    await once(server, "listening");
    servers.push(server);
    agentUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/a2a/v1`;
    app.use("/a2a/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: async () => card(agentUrl) }));
  });
  afterAll(() => closeAll(servers));

  it("finds the card where a2a-js's resolver looks: relative to the agent's URL", () => {
    expect(liveCardUrl("https://h.example").href).toBe("https://h.example/.well-known/agent-card.json");
    expect(liveCardUrl("https://h.example/a2a/v1").href).toBe("https://h.example/a2a/.well-known/agent-card.json");
    expect(liveCardUrl("https://h.example/a2a/v1/").href).toBe("https://h.example/a2a/v1/.well-known/agent-card.json");
  });

  it("reads an a2a-js agent's card, sending A2A-Version and its User-Agent, and no credentials", async () => {
    const before = seen.length;
    const withUser = agentUrl.replace("http://", "http://user:secret@");
    const outcome = await fetchLiveCard(withUser, limits());
    expect(outcome).toMatchObject({ ok: true, status: 200, card: { name: "Recipe Agent", version: "1.0.0" } });
    const req = seen[before];
    expect(req?.headers["a2a-version"]).toBe("1.0");
    expect(req?.headers["user-agent"]).toBe("agent-definition-registry-test/1 (probe)");
    expect(req?.headers.authorization).toBeUndefined();
    expect(req?.headers.cookie).toBeUndefined();
    expect(req?.headers.host).toBe(new URL(agentUrl).host);
  });

  it("follows up to maxRedirects redirects, and fails past them", async () => {
    const target = await plainServer((_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(card("http://x.example")));
    });
    servers.push(target.server);
    const hop = (to: string) =>
      plainServer((_req, res) => {
        res.writeHead(302, { location: to });
        res.end();
      });
    const third = await hop(`${target.base}/card`);
    const second = await hop(third.base);
    const first = await hop(second.base);
    const zeroth = await hop(first.base);
    servers.push(third.server, second.server, first.server, zeroth.server);
    expect(await fetchLiveCard(first.base, limits())).toMatchObject({ ok: true, card: { name: "Recipe Agent" } });
    expect(await fetchLiveCard(zeroth.base, limits())).toMatchObject({ ok: false, kind: "REDIRECTS", status: 302 });
  });

  it("never connects to an address PROBE_ALLOW does not open, also when redirected there", async () => {
    const forbidden = await plainServer((_req, res) => res.end("{}"), "127.0.0.3");
    const redirecting = await plainServer((_req, res) => {
      res.writeHead(301, { location: `${forbidden.base}/` });
      res.end();
    }, "127.0.0.2");
    servers.push(forbidden.server, redirecting.server);
    const only2 = limits({ allowance: parseProbeAllowance("127.0.0.2/32") });
    expect(await fetchLiveCard(forbidden.base, only2)).toMatchObject({ ok: false, kind: "BLOCKED_ADDRESS" });
    const redirected = await fetchLiveCard(redirecting.base, only2);
    expect(redirected).toMatchObject({ ok: false, kind: "BLOCKED_ADDRESS" });
    expect(redirected.ok ? "" : redirected.message).toContain("127.0.0.3 is a loopback address");
    expect(redirecting.requests).toHaveLength(1);
    expect(forbidden.requests).toHaveLength(0);
    const port = new URL(forbidden.base).port;
    const byName = await fetchLiveCard(`http://localhost:${port}/`, limits({ allowance: parseProbeAllowance("") }));
    expect(byName).toMatchObject({ ok: false, kind: "BLOCKED_ADDRESS" });
  });

  it("tells a closed port, a silent agent, a large answer, an error status and a non-card apart", async () => {
    const closed = await plainServer(() => {});
    await new Promise((resolve) => closed.server.close(resolve));
    expect(await fetchLiveCard(closed.base, limits())).toMatchObject({ ok: false, kind: "REFUSED" });

    const silent = await plainServer(() => {});
    const large = await plainServer((_req, res) => res.end(Buffer.alloc(5 * 1024 * 1024, 32)));
    const chunked = await plainServer((_req, res) => {
      res.write(Buffer.alloc(200 * 1024, 32));
      res.end(Buffer.alloc(200 * 1024, 32));
    });
    const failing = await plainServer((_req, res) => {
      res.statusCode = 503;
      res.end("{}");
    });
    const notCard = await plainServer((_req, res) => res.end(JSON.stringify({ hello: "world" })));
    const notJson = await plainServer((_req, res) => res.end("<html></html>"));
    servers.push(silent.server, large.server, chunked.server, failing.server, notCard.server, notJson.server);

    const started = Date.now();
    expect(await fetchLiveCard(silent.base, limits({ timeoutMs: 300 }))).toMatchObject({ ok: false, kind: "TIMEOUT" });
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(await fetchLiveCard(large.base, limits())).toMatchObject({ ok: false, kind: "TOO_LARGE", status: 200 });
    expect(await fetchLiveCard(chunked.base, limits())).toMatchObject({ ok: false, kind: "TOO_LARGE" });
    expect(await fetchLiveCard(failing.base, limits())).toMatchObject({ ok: false, kind: "HTTP_STATUS", status: 503 });
    expect(await fetchLiveCard(notCard.base, limits())).toMatchObject({ ok: false, kind: "NOT_A_CARD" });
    expect(await fetchLiveCard(notJson.base, limits())).toMatchObject({ ok: false, kind: "NOT_A_CARD" });
    expect(await fetchLiveCard("http://no-such-host.invalid/", limits())).toMatchObject({ ok: false, kind: "DNS" });
  });
});
