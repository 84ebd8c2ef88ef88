import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AuthorizedProcess, spawnAuthorizedServer } from "../support/authorized-process.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";

const [sqlite] = testDatabases();

/** A port free right now on 127.0.0.1. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("METRICS_PORT", () => {
  let database: FreshDatabase;
  let server: AuthorizedProcess;
  let metricsUrl: string;

  beforeAll(async () => {
    database = await sqlite!.create();
    const port = await freePort();
    metricsUrl = `http://127.0.0.1:${port}`;
    server = await spawnAuthorizedServer(database, { METRICS_PORT: String(port) });
  });
  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
  });

  it("serves /metrics on a port of its own, counting the API's requests", async () => {
    expect(
      (
        await fetch(`${server.baseUrl}/api/asor/v1/default/agentDefinition`, {
          headers: { authorization: server.authorization },
        })
      ).status,
    ).toBe(200);
    const res = await fetch(`${metricsUrl}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    // The sample is taken once the answer has gone out; a later scrape shows it.
    await expect
      .poll(async () => (await fetch(`${metricsUrl}/metrics`)).text())
      .toMatch(
        new RegExp(
          /^asor_requests_total\{protocol="rest",/.source +
            /operation="asor.v1.AgentDefinitionService\/ListAgentDefinitions",code="200"\} 1$/.source,
          "m",
        ),
      );
  });

  it("no longer serves /metrics on the API port", async () => {
    const res = await fetch(`${server.baseUrl}/metrics`);
    expect(res.status).toBe(404);
  });

  it("serves nothing else on the metrics port, and /metrics to GET and HEAD only", async () => {
    expect(
      (
        await fetch(`${metricsUrl}/api/asor/v1/default/agentDefinition`, {
          headers: { authorization: server.authorization },
        })
      ).status,
    ).toBe(404);
    expect((await fetch(`${metricsUrl}/healthz`)).status).toBe(404);
    expect((await fetch(`${metricsUrl}/metrics`, { method: "HEAD" })).status).toBe(200);
    const post = await fetch(`${metricsUrl}/metrics`, { method: "POST" });
    expect(post.status).toBe(405);
    expect(post.headers.get("allow")).toBe("GET, HEAD");
  });

  it("stops serving the metrics port on SIGTERM, exiting 0", async () => {
    expect(await server.stop()).toBe(0);
    await expect(fetch(`${metricsUrl}/metrics`)).rejects.toThrow();
  });
});
