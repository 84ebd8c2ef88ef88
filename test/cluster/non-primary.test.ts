import { describe, expect, it } from "vitest";
import { galeraSkipped, NODES, nodeStatus, queryNode, useGaleraDatabase } from "../support/galera.js";
import { useReplicas } from "../support/replicas.js";

/** Polls `check` every 500 ms until it holds, for at most `seconds`. */
async function until(check: () => Promise<boolean>, seconds: number): Promise<boolean> {
  for (let i = 0; i < seconds * 2; i++) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return check();
}

/**
 * A node out of the primary component (isolated with gmcast.isolate) answers `SELECT 1` but every query on
 * a table with error 1047: the replica that has only that node answers 503 and is not ready (never a 500,
 * never ready), the replica that has others moves to one, and both serve again once the node is back.
 */
describe.skipIf(galeraSkipped())("a node that leaves the primary component", () => {
  const db = useGaleraDatabase();
  // Node 1's replica first (it migrates), then one with node 3 alone, and one with node 3 first.
  const replicas = useReplicas(db, (d) => {
    const hostOf = (n: number) => new URL(d.url(n)).host;
    return [d.url(1), d.url(3), d.url(3).replace(hostOf(3), `${hostOf(3)},${hostOf(1)}`)];
  });

  const get = async (i: number, path: string) => {
    const res = await fetch(`${replicas().servers[i]!.baseUrl}${path}`, {
      headers: { authorization: replicas().authorization },
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  it("is answered 503 and unready through a replica with that node alone, and served through another", async () => {
    const before = await replicas().post(0, "Written before the isolation");
    expect(before.status).toBe(201);
    const byId = `/api/asor/v1/default/agentDefinition/${before.body.id}`;
    await queryNode(3, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'");
    try {
      expect(await until(async () => (await nodeStatus(3))?.wsrep_ready === "OFF", 30)).toBe(true);
      // Node 3 alone: unavailable, and says so at /readyz.
      expect((await get(1, "/readyz")).status).toBe(503);
      const refused = await replicas().post(1, "Refused by a non-primary node");
      expect([refused.status, refused.body.code]).toEqual([503, "UNAVAILABLE"]);
      expect((await get(1, byId)).status).toBe(503);
      // Node 3 first, then node 1: moved, ready, reads and writes.
      expect((await replicas().post(2, "Through the next node")).status).toBe(201);
      expect((await get(2, byId)).status).toBe(200);
      expect((await get(2, "/readyz")).status).toBe(200);
    } finally {
      await queryNode(3, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'");
    }
    const whole = async () => {
      for (const n of NODES) {
        const status = await nodeStatus(n).catch(() => undefined);
        if (status?.wsrep_ready !== "ON" || status.wsrep_cluster_size !== "3") return false;
      }
      return true;
    };
    expect(await until(whole, 60)).toBe(true);
    // Back in the primary component: the replica with node 3 alone is ready and writes again.
    expect(await until(async () => (await get(1, "/readyz")).status === 200, 20)).toBe(true);
    expect((await replicas().post(1, "Written after the isolation")).status).toBe(201);
  }, 180_000);
});
