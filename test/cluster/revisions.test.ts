import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { minimalDefinition } from "../support/definitions.js";
import { galeraSkipped, NODES, useGaleraDatabase } from "../support/galera.js";
import { allNodesFrom, type Replicas, startReplicas } from "../support/replicas.js";

const BASE = "/api/asor/v1/default/agentDefinition";

interface Change {
  readonly revision: number;
  readonly definition_id: string;
}

/**
 * Issue 21, item 6 (with issue 20, item 1): revisions in commit order on a 3-node multi-primary cluster.
 * Writes of one tenant through three replicas, each on its own node, take the tenant's revisions; every node
 * applies the cluster's commits in one order, so a reader polling the change log on any node sees a gap-free
 * prefix 1..k at every moment (never revision n+1 before n), and at the end every node holds the same log,
 * one record per acknowledged change, and each definition's modRevision is its last record's revision.
 */
describe.skipIf(galeraSkipped())("revisions on a cluster", () => {
  const db = useGaleraDatabase();
  let replicas: Replicas;

  beforeAll(async () => {
    replicas = await startReplicas(
      db(),
      NODES.map((n) => allNodesFrom(db(), n)),
    );
  }, 120_000);

  afterAll(async () => {
    await replicas?.stop();
  });

  async function call(i: number, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const res = await fetch(`${replicas.servers[i]!.baseUrl}${BASE}${path}`, {
      method,
      headers: {
        authorization: replicas.authorization,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text === "" ? undefined : JSON.parse(text) };
  }

  const changesOn = (n: number) =>
    db().query<Change[]>(
      n,
      "SELECT revision, definition_id FROM definition_changes WHERE tenant = 'default' ORDER BY revision",
    );

  it("every node sees a gap-free prefix while three replicas write, and the same log at the end", async () => {
    // What each poller saw that was not a prefix 1..k: must stay empty.
    const holes: string[] = [];
    let polls = 0;
    let writing = true;
    // A poller whose read fails (its node left the cluster) stops and says so here, not as an unhandled
    // rejection while the writes go on.
    const pollers = NODES.map(async (n) => {
      try {
        while (writing) {
          const revisions = (await changesOn(n)).map((change) => Number(change.revision));
          polls++;
          const hole = revisions.findIndex((revision, index) => revision !== index + 1);
          if (hole !== -1) holes.push(`node ${n}: revision ${revisions[hole]} at position ${hole + 1}`);
        }
      } catch (error) {
        holes.push(`node ${n}: ${error instanceof Error ? error.message : String(error)}`);
      }
    });

    try {
      await writeThroughAll();
    } finally {
      writing = false;
      await Promise.all(pollers);
    }

    expect(polls).toBeGreaterThan(0);
    expect(holes).toEqual([]);
    await expectSameLogs();
  }, 180_000);

  let created: { status: number; body: any }[] = [];
  let deprecated: { status: number; body: any }[] = [];

  async function writeThroughAll(): Promise<void> {
    // 60 new agents through the three replicas at once, then new content for each and a status change,
    // each through another replica than the last.
    created = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        call(i % 3, "POST", "", minimalDefinition({ name: `Revised ${i}`, description: "first" })),
      ),
    );
    expect(
      created.map((answer) => answer.status),
      serverTrouble(created),
    ).toEqual(Array(60).fill(201));
    const updated = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        call((i + 1) % 3, "POST", "", minimalDefinition({ name: `Revised ${i}`, description: "second" })),
      ),
    );
    // POST answers 201 whether it created the key or gave it new content.
    expect(
      updated.map((answer) => answer.status),
      serverTrouble(updated),
    ).toEqual(Array(60).fill(201));
    deprecated = await Promise.all(
      created.map((answer, i) => call((i + 2) % 3, "PATCH", `/${answer.body.id}/status`, { status: "DEPRECATED" })),
    );
    expect(
      deprecated.map((answer) => answer.status),
      serverTrouble(deprecated),
    ).toEqual(Array(60).fill(200));
  }

  /** What a failing step shows: the first answers that failed and what each replica logged as warning or error. */
  function serverTrouble(answers: { status: number; body: any }[]): string {
    const failed = answers.flatMap((answer, i) => (answer.status < 300 ? [] : [`#${i}: ${JSON.stringify(answer)}`]));
    const logged = replicas.servers.map((server, i) =>
      server
        .stderr()
        .split("\n")
        .filter((line) => line.includes('"error"') || line.includes('"warn"'))
        .slice(0, 5)
        .map((line) => `replica ${i}: ${line}`),
    );
    return [...failed.slice(0, 5), ...logged.flat()].join("\n");
  }

  async function expectSameLogs(): Promise<void> {
    // Every node holds the same log once each has applied all of it (wsrep_sync_wait on the replicas' reads).
    const logs = await Promise.all(
      NODES.map((n) =>
        db().query<Change[]>(
          n,
          "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT revision, definition_id, kind FROM definition_changes " +
            "WHERE tenant = 'default' ORDER BY revision",
        ),
      ),
    );
    const plain = logs.map((log) => log.map((change) => `${change.revision}:${change.definition_id}`));
    expect(plain[1]).toEqual(plain[0]);
    expect(plain[2]).toEqual(plain[0]);
    // One record per change: 60 created, 60 updated in place, 60 status changes.
    const perDefinition = new Map<string, number>();
    for (const change of logs[0]!)
      perDefinition.set(change.definition_id, (perDefinition.get(change.definition_id) ?? 0) + 1);
    const odd = [...perDefinition.entries()].filter(([, count]) => count !== 3).map(([id]) => id);
    expect(
      odd.map((id) => logs[0]!.filter((change) => change.definition_id === id)),
      JSON.stringify({
        perDefinition: perDefinition.size,
        rows: await Promise.all(
          odd.map((id) =>
            db().query(1, "SELECT status, mod_revision, revision FROM agent_definitions WHERE id = ?", [id]),
          ),
        ),
        answers: odd.map((id) => deprecated[created.findIndex((answer) => answer.body.id === id)]?.body?.meta),
        errors: replicas.servers.map((server) =>
          server
            .stderr()
            .split("\n")
            .filter((l) => l.includes("rror"))
            .slice(0, 3),
        ),
      }),
    ).toEqual([]);
    expect(plain[0]).toHaveLength(180);
    expect(logs[0]!.map((change) => Number(change.revision))).toEqual(Array.from({ length: 180 }, (_, i) => i + 1));

    // Each definition's modRevision, read through each replica, is its last record's revision.
    const lastOf = new Map<string, number>();
    for (const change of logs[0]!) lastOf.set(change.definition_id, Number(change.revision));
    for (const [i, answer] of created.entries()) {
      const read = await call(i % 3, "GET", `/${answer.body.id}`);
      expect(read.status).toBe(200);
      expect(Number(read.body.meta.modRevision)).toBe(lastOf.get(answer.body.id));
    }
  }
});
