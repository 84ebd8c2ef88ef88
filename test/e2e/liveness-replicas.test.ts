/**
 * The prober on two service processes on one MariaDB database (issue 44, item 5): between them each agent is
 * probed once per interval, not once per process (counted at the agents: no two probes of one agent closer than
 * most of an interval); after one process is killed (SIGKILL: its leases are left behind), the other probes every
 * agent within two intervals.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cardAgent, type TestAgent } from "../support/a2a-agents.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { type ReachableServer, startServerProcess } from "../support/runtimes.js";
import type { ServerProcess } from "../support/server-process.js";

const mariadb = testDatabases().find((db) => db.name === "mariadb");
const INTERVAL_MS = 2_000;
const ENV = {
  PROBE_ENABLED: "true",
  PROBE_ALLOW: "127.0.0.0/8",
  PROBE_INTERVAL_MS: String(INTERVAL_MS),
  PROBE_TIMEOUT_MS: "500",
};
const AGENTS = 8;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.skipIf(mariadb === undefined || mariadb.skip)("the prober on two service processes on one MariaDB", () => {
  let database: FreshDatabase;
  const processes: (ReachableServer & ServerProcess)[] = [];
  const agents: TestAgent[] = [];

  beforeAll(async () => {
    database = await mariadb!.create();
    // The first migrates; the second starts on the migrated database.
    processes.push(await startServerProcess(database, ENV, "node"));
    processes.push(await startServerProcess(database, ENV, "node"));
  }, 120_000);
  afterAll(async () => {
    for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) await p.stop();
    for (const agent of agents) await agent.close();
    await database?.cleanup();
  });

  it("probes each agent once per interval between them, and the survivor takes over a killed one's", async () => {
    const [first, second] = processes as [ReachableServer & ServerProcess, ReachableServer & ServerProcess];
    for (let i = 0; i < AGENTS; i++) {
      const agent = await cardAgent(() => ({ name: `Replica agent ${i}` }));
      agents.push(agent);
      const res = await fetch(`${first.baseUrl}/api/asor/v1/default/agentDefinition`, {
        method: "POST",
        headers: { authorization: first.authorization, "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition({ name: `Replica agent ${i}`, url: agent.url })),
      });
      expect(res.status).toBe(201);
    }
    // Four intervals of probing by both processes.
    await sleep(5 * INTERVAL_MS);
    for (const [i, agent] of agents.entries()) {
      const times = agent.times!;
      expect(times.length, `agent ${i}`).toBeGreaterThanOrEqual(3);
      // Once per interval in all: the next due time is an interval on (±10 %) from the end of the last probe.
      const gaps = times.slice(1).map((t, j) => t - times[j]!);
      expect(Math.min(...gaps), `agent ${i}: ${JSON.stringify(gaps)}`).toBeGreaterThan(0.8 * INTERVAL_MS);
      expect(times.length, `agent ${i}`).toBeLessThanOrEqual(5 * 1.2 + 1);
    }
    // Killed: whatever it had leased is left until its leases end.
    first.child.kill("SIGKILL");
    const killedAt = Date.now();
    await sleep(2 * INTERVAL_MS + 500);
    for (const [i, agent] of agents.entries()) {
      const after = agent.times!.filter((t) => t > killedAt);
      expect(after.length, `agent ${i} after the kill`).toBeGreaterThanOrEqual(1);
      expect(after[0]! - killedAt, `agent ${i}`).toBeLessThanOrEqual(2 * INTERVAL_MS);
    }
    expect(second.child.exitCode).toBeNull();
  }, 120_000);
});
