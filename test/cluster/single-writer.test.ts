import { describe, expect, it } from "vitest";
import { galeraSkipped, killNode, NODES, restartNode, useGaleraDatabase } from "../support/galera.js";
import {
  agentNumbers,
  allNodesFrom,
  expectAgreement,
  nodeCounters,
  useReplicas,
  writeRetries,
} from "../support/replicas.js";
import { startWriteBurst, type WriteOutcome } from "../support/write-burst.js";

const PATH = "/api/asor/v1/default/agentDefinition";

/**
 * What each node counts of the write sets it replicates: `wsrep_local_commits` (committed from this node),
 * `wsrep_local_cert_failures` (lost certification) and `wsrep_local_bf_aborts` (local transactions aborted
 * for another node's write).
 */
const COUNTERS = ["wsrep_local_commits", "wsrep_local_cert_failures", "wsrep_local_bf_aborts"] as const;

async function countersOfEveryNode(): Promise<Array<Record<string, number>>> {
  return Promise.all(NODES.map((n) => nodeCounters(n, COUNTERS)));
}

/** What each node's counters grew by between two readings. */
function grown(before: Array<Record<string, number>>, after: Array<Record<string, number>>) {
  return after.map((counts, i) => Object.fromEntries(COUNTERS.map((c) => [c, counts[c]! - before[i]![c]!])));
}

/**
 * DATABASE_WRITE_URL (single-writer): three replicas, each reading through its own node (DATABASE_URL
 * with it first), all writing through the same list, node 1 first. Every write commits on node 1, so
 * nothing conflicts; when node 1 is killed every replica's writes move to node 2, the next in the list.
 */
describe.skipIf(galeraSkipped())("single-writer: DATABASE_WRITE_URL the same on three replicas", () => {
  const db = useGaleraDatabase();
  const replicas = useReplicas(
    db,
    (d) => NODES.map((n) => allNodesFrom(d, n)),
    (d) => ({ DATABASE_WRITE_URL: allNodesFrom(d, 1) }),
  );

  it("300 concurrent new agents over three replicas: 300 x 201, every commit on node 1, none retried", async () => {
    const before = await countersOfEveryNode();
    const answers = await Promise.all(Array.from({ length: 300 }, (_, i) => replicas().post(i % 3, `Single ${i}`)));
    const refused = answers.filter((a) => a.status !== 201).map((a) => `${a.status} ${JSON.stringify(a.body)}`);
    expect(refused.slice(0, 3), `${refused.length} not created`).toEqual([]);
    const expected = Array.from({ length: 300 }, (_, i) => i + 1);
    for (const n of NODES) expect(await agentNumbers(db(), n), `through node ${n}`).toEqual(expected);

    const growth = grown(before, await countersOfEveryNode());
    console.log(`single-writer: the nodes' counters grew by ${JSON.stringify(growth)}`);
    expect(growth[0]!.wsrep_local_commits, "commits from node 1").toBeGreaterThanOrEqual(300);
    expect(
      growth.slice(1).map((g) => g.wsrep_local_commits),
      "commits from nodes 2 and 3",
    ).toEqual([0, 0]);
    expect(growth.map((g) => g.wsrep_local_cert_failures + g.wsrep_local_bf_aborts)).toEqual([0, 0, 0]);
    const retries = await Promise.all(replicas().servers.map(writeRetries));
    console.log(`single-writer: writes run again, per replica: ${JSON.stringify(retries)}`);
    for (const r of retries)
      expect({ certification: r.certification, deadlock: r.deadlock }).toEqual({
        certification: 0,
        deadlock: 0,
      });
  }, 120_000);

  it("kill -9 of the writer node: every replica's writes move to node 2, nothing acknowledged is lost", async () => {
    const bursts = replicas().servers.map((server, i) =>
      startWriteBurst({
        url: `${server.baseUrl}${PATH}`,
        authorization: replicas().authorization,
        writers: 4,
        prefix: `Single failover r${i}`,
      }),
    );
    const created = (os: readonly WriteOutcome[], after = 0) =>
      os.filter((o) => o.status === 201 && o.startedAt >= after);
    let moved: Array<Record<string, number>> = [];
    try {
      await Promise.all(bursts.map((b) => b.until((os) => created(os).length >= 20, 60_000)));
      await killNode(1);
      const killedAt = Date.now();
      // Every replica writes again (its reads' node is alive for two of them: only the writes had to move).
      await Promise.all(bursts.map((b) => b.until((os) => created(os, killedAt).length >= 20, 60_000)));
      const firstWrites = bursts.map(
        (b) =>
          created(b.outcomes, killedAt).reduce((first, o) => Math.min(first, o.startedAt + o.millis), Infinity) -
          killedAt,
      );
      console.log(
        `single-writer: first write acknowledged after the kill, per replica (ms): ${firstWrites.join(", ")}`,
      );
      // From here on every write must commit through node 2: count the commits of nodes 2 and 3 over 20 more each.
      const before = await Promise.all([2, 3].map((n) => nodeCounters(n, COUNTERS)));
      const since = Date.now();
      await Promise.all(bursts.map((b) => b.until((os) => created(os, since).length >= 20, 60_000)));
      moved = grown(before, await Promise.all([2, 3].map((n) => nodeCounters(n, COUNTERS))));
    } finally {
      await Promise.all(bursts.map((b) => b.stop()));
    }
    console.log(`single-writer: nodes 2 and 3's counters after the move grew by ${JSON.stringify(moved)}`);
    expect(moved[0]!.wsrep_local_commits, "commits from node 2").toBeGreaterThanOrEqual(60);
    expect(moved[1]!.wsrep_local_commits, "commits from node 3").toBe(0);
    expect(moved.map((g) => g.wsrep_local_cert_failures + g.wsrep_local_bf_aborts)).toEqual([0, 0]);
    const outcomes = bursts.flatMap((b) => b.outcomes);
    expect(outcomes.filter((o) => o.status === 500).map((o) => o.body)).toEqual([]);
    await restartNode(1);
    await expectAgreement(db(), outcomes, "Single failover r");
  }, 240_000);
});
