import { execFile } from "node:child_process";
import { createServer } from "node:net";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { openLocalIssuer } from "../../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import { minimalDefinition } from "../support/definitions.js";
import { galeraSkipped, NODES, useGaleraDatabase } from "../support/galera.js";
import { allNodesFrom, useReplicas } from "../support/replicas.js";
import { ALL_DOMAINS } from "../support/server.js";

const run = promisify(execFile);
const BASE = "/api/asor/v1/default/agentDefinition";

interface Answer {
  readonly status: number;
  readonly etag: string | null;
  readonly body: any;
}

/**
 * Issue 21, item 6: what the registry does on one database, it does on a 3-node multi-primary cluster
 * through three replicas, each on its own node: search answers the same through every node (the stopword
 * case included), the counters of migrations 0009 and 0010 equal COUNT(*) on every node after concurrent
 * writes, the lifecycle and ETags hold across replicas, and the admin command works with a URL of
 * several hosts.
 */
describe.skipIf(galeraSkipped())("search, counters, lifecycle, ETags and the admin command on a cluster", () => {
  const db = useGaleraDatabase();
  const replicas = useReplicas(db, (d) => NODES.map((n) => allNodesFrom(d, n)));

  /** A request through replica i, JSON both ways. */
  async function call(
    i: number,
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    const res = await fetch(`${replicas().servers[i]!.baseUrl}${BASE}${path}`, {
      method,
      headers: {
        authorization: replicas().authorization,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, etag: res.headers.get("etag"), body: text === "" ? undefined : JSON.parse(text) };
  }

  /**
   * Returns once every node has applied every write committed anywhere before it was called (a read with
   * wsrep_sync_wait through each node): replicas read without it, so a read through another node right after
   * a write may not see it yet (docs/operations.md).
   */
  async function replicated(): Promise<void> {
    await Promise.all(
      NODES.map((n) => db().query(n, "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1 FROM tenants LIMIT 1")),
    );
  }

  it("finds the same definitions through every replica, q=the included (no stopwords on any node)", async () => {
    const provider = "Provider=Stopwords";
    const created = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        call(
          i % 3,
          "POST",
          "",
          minimalDefinition({
            name: `Stopword Agent ${i}`,
            provider: { id: provider },
            description: i < 9 ? "Reads the news of the day" : "Reads news",
            skills: [{ id: "read", name: "Read", description: "Reads", tags: [{ tag: i % 2 === 0 ? "even" : "odd" }] }],
          }),
        ),
      ),
    );
    expect(created.map((c) => c.status)).toEqual(Array(12).fill(201));
    const withThe = created.slice(0, 9).map((c) => c.body.id as string);
    await replicated();
    const ids = (answer: Answer) => (answer.body.data as Array<{ id: string }>).map((d) => d.id).sort();
    const query = (q: string) => `?provider=${encodeURIComponent(provider)}&${q}&limit=100`;
    for (const i of [0, 1, 2]) {
      const the = await call(i, "GET", query("q=the"));
      expect(the.status, `q=the through replica ${i}`).toBe(200);
      expect({ total: the.body.total, ids: ids(the) }, `q=the through replica ${i}`).toEqual({
        total: 9,
        ids: [...withThe].sort(),
      });
      const theNews = await call(i, "GET", query("q=the%20new"));
      expect(ids(theNews), `q=the new through replica ${i}`).toEqual([...withThe].sort());
      expect((await call(i, "GET", query("q=new"))).body.total, `q=new through replica ${i}`).toBe(12);
      // A tag filter's total comes from the counters of migration 0010.
      expect((await call(i, "GET", query("tag=even"))).body.total, `tag=even through replica ${i}`).toBe(6);
    }
  }, 120_000);

  it("keeps the counters equal to COUNT(*) on every node after concurrent writes through three replicas", async () => {
    const agent = (i: number, version = "1.0.0", description = "Counts") =>
      minimalDefinition({
        name: `Counted Agent ${i}`,
        provider: { id: "Provider=Counters" },
        version,
        description,
        skills: [
          {
            id: `skill-${i % 4}`,
            name: "Skill",
            description: "A skill",
            tags: [{ tag: ["red", "green", "blue"][i % 3] }],
          },
        ],
      });
    const created = await Promise.all(Array.from({ length: 30 }, (_, i) => call(i % 3, "POST", "", agent(i))));
    expect(created.map((c) => c.status)).toEqual(Array(30).fill(201));
    await replicated();
    // Each agent written again through another replica than its creator's, all at once: a new version (moves
    // `latest`), new content of the first version (its terms rewritten), or a status change (deprecated,
    // deactivated, and deactivated then reactivated).
    const writes = created.map(async (c, i) => {
      const other = (i + 1) % 3;
      const id = c.body.id as string;
      switch (i % 5) {
        case 0:
          return [await call(other, "POST", "", agent(i, "2.0.0"))];
        case 1:
          return [await call(other, "POST", "", agent(i, "1.0.0", "Counts, rewritten"))];
        case 2:
          return [await call(other, "PATCH", `/${id}/status`, { status: "DEPRECATED" })];
        case 3:
          return [await call(other, "PATCH", `/${id}/status`, { status: "DEACTIVATED" })];
        default:
          return [
            await call(other, "PATCH", `/${id}/status`, { status: "DEACTIVATED" }),
            await call((i + 2) % 3, "PATCH", `/${id}/status`, { status: "ACTIVE" }),
          ];
      }
    });
    const failed = (await Promise.all(writes)).flat().filter((a) => a.status !== 200 && a.status !== 201);
    const logs = () =>
      replicas().servers.map((s) =>
        s
          .stderr()
          .split("\n")
          .filter((l) => l.includes('"error"')),
      );
    expect(
      failed.map((a) => ({ status: a.status, body: a.body })),
      JSON.stringify(logs()),
    ).toEqual([]);
    await replicated();
    for (const n of NODES) {
      // Every counter row against the rows it counts, shard by shard: the differences, which must be none.
      const terms = await db().query<unknown[]>(
        n,
        `SELECT t.tenant, t.kind, t.value, t.status, t.is_latest, t.shard, t.counted, COALESCE(c.n, 0) AS n
         FROM (SELECT tenant, kind, value, status, is_latest, seq % 16 AS shard, COUNT(*) AS counted
               FROM definition_terms GROUP BY tenant, kind, value, status, is_latest, seq % 16) t
         LEFT JOIN definition_term_counts c ON c.tenant = t.tenant AND c.kind = t.kind AND c.value = t.value
           AND c.status = t.status AND c.is_latest = t.is_latest AND c.shard = t.shard
         WHERE t.counted <> COALESCE(c.n, 0)
         UNION ALL
         SELECT c.tenant, c.kind, c.value, c.status, c.is_latest, c.shard, 0, c.n FROM definition_term_counts c
         WHERE c.n <> 0 AND NOT EXISTS (SELECT 1 FROM definition_terms t WHERE t.tenant = c.tenant AND
           t.kind = c.kind AND t.value = c.value AND t.status = c.status AND t.is_latest = c.is_latest
           AND t.seq % 16 = c.shard)`,
      );
      expect(terms, `definition_term_counts against definition_terms through node ${n}`).toEqual([]);
      const definitions = await db().query<unknown[]>(
        n,
        `SELECT d.tenant, d.status, d.is_latest, d.shard, d.counted, COALESCE(c.n, 0) AS n
         FROM (SELECT tenant, status, is_latest, seq % 16 AS shard, COUNT(*) AS counted
               FROM agent_definitions GROUP BY tenant, status, is_latest, seq % 16) d
         LEFT JOIN definition_counts c ON c.tenant = d.tenant AND c.status = d.status
           AND c.is_latest = d.is_latest AND c.shard = d.shard
         WHERE d.counted <> COALESCE(c.n, 0)
         UNION ALL
         SELECT c.tenant, c.status, c.is_latest, c.shard, 0, c.n FROM definition_counts c
         WHERE c.n <> 0 AND NOT EXISTS (SELECT 1 FROM agent_definitions d WHERE d.tenant = c.tenant
           AND d.status = c.status AND d.is_latest = c.is_latest AND d.seq % 16 = c.shard)`,
      );
      expect(definitions, `definition_counts against agent_definitions through node ${n}`).toEqual([]);
    }
    // And the totals the replicas answer from them agree with each other.
    const filters = ["", "&status=ALL", "&tag=red", "&tag=red&status=ALL", "&status=DEACTIVATED"];
    const totals = (i: number) =>
      Promise.all(
        filters.map(
          async (filter) =>
            (await call(i, "GET", `?provider=${encodeURIComponent("Provider=Counters")}${filter}`)).body.total,
        ),
      );
    // 30 agents, 6 of them (i % 5 == 0) with a second version: 36 versions, 6 deactivated (i % 5 == 3). Red
    // (i % 3 == 0): 10 first versions and 2 second ones, 2 of them deactivated.
    for (const i of [0, 1, 2]) expect(await totals(i), `totals through replica ${i}`).toEqual([30, 36, 10, 12, 6]);
  }, 180_000);

  it("holds ETags, If-Match and the lifecycle across replicas", async () => {
    const created = await call(0, "POST", "", minimalDefinition({ name: "Lifecycle Agent" }));
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    await replicated();
    const read = await call(1, "GET", `/${id}`);
    expect(read.etag).toBe(created.etag);
    expect((await call(2, "GET", `/${id}`, undefined, { "if-none-match": created.etag! })).status).toBe(304);

    // Two status changes with the same If-Match through two replicas on two nodes, ten times: exactly one
    // of each pair wins. The loser read the row before or after the winner's commit reached its node:
    // either its condition fails, or its commit loses certification and the retry finds the new ETag.
    let etag = created.etag!;
    for (let round = 0; round < 10; round++) {
      const status = round % 2 === 0 ? "DEPRECATED" : "ACTIVE";
      const pair = await Promise.all(
        [1, 2].map((i) => call(i, "PATCH", `/${id}/status`, { status }, { "if-match": etag })),
      );
      expect(pair.map((a) => a.status).sort(), `round ${round}`).toEqual([200, 412]);
      const winner = pair.find((a) => a.status === 200)!;
      expect(winner.body.meta.revision).toBe(round + 2);
      etag = winner.etag!;
    }
    // A stale ETag through the third replica: 412, nothing written.
    expect(
      (await call(0, "PATCH", `/${id}/status`, { status: "DEPRECATED" }, { "if-match": created.etag! })).status,
    ).toBe(412);

    // Deactivated through one replica: out of the list and its Agent_ID through the others, readable by id;
    // reactivated through another: back.
    const deactivated = await call(1, "PATCH", `/${id}/status`, { status: "DEACTIVATED" }, { "if-match": etag });
    expect(deactivated.status).toBe(200);
    await replicated();
    for (const i of [0, 2]) {
      const listed = await call(i, "GET", "?name=Lifecycle%20Agent");
      expect(listed.body.total, `listed through replica ${i}`).toBe(0);
      const byId = await call(i, "GET", `/${id}`);
      expect([byId.body.meta.status, byId.body.meta.latest, byId.etag]).toEqual([
        "DEACTIVATED",
        false,
        deactivated.etag,
      ]);
    }
    const reactivated = await call(
      2,
      "PATCH",
      `/${id}/status`,
      { status: "ACTIVE" },
      { "if-match": deactivated.etag! },
    );
    expect(reactivated.status).toBe(200);
    await replicated();
    for (const i of [0, 1]) {
      const byId = await call(i, "GET", `/${id}`);
      expect([byId.body.meta.status, byId.body.meta.latest, byId.etag]).toEqual(["ACTIVE", true, reactivated.etag]);
      expect((await call(i, "GET", "?name=Lifecycle%20Agent")).body.total).toBe(1);
    }
  }, 120_000);

  it("runs the admin command with a DATABASE_URL of several hosts, the first of them down", async () => {
    const closed = await closedPort();
    /** DATABASE_URL naming a host that refuses connections, then every node from node `first`. */
    const url = (first: number) => {
      const all = allNodesFrom(db(), first);
      const hosts = new URL(db().url(first)).host;
      return all.replace(hosts, `127.0.0.1:${closed},${hosts}`);
    };
    const admin = async (first: number, ...args: string[]) => {
      const { stdout } = await run("node_modules/.bin/tsx", ["src/main/admin.ts", ...args], {
        env: { ...process.env, DATA_DIR: db().dataDir, DATABASE_URL: url(first) },
      });
      return stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line));
    };
    const [created] = await admin(2, "tenant", "create", "clustered", "--sequence-prefix", "CL-");
    expect(created).toMatchObject({ name: "clustered", sequencePrefix: "CL-" });
    for (const n of NODES) {
      const names = (await admin(n, "tenant", "list")).map((t: { name: string }) => t.name);
      expect(names, `listed through node ${n} first`).toContain("clustered");
    }
    // The tenant serves through the replicas (which did not restart): its agents are numbered with its prefix.
    const issuer = await openLocalIssuer(localIssuerKeyFile(db().dataDir), parseAuthConfig({}).config);
    const authorization = `Bearer ${await issuer.issue({ tenant: "clustered", domains: ALL_DOMAINS })}`;
    const post = async (i: number, name: string) => {
      const res = await fetch(`${replicas().servers[i]!.baseUrl}/api/asor/v1/clustered/agentDefinition`, {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify(minimalDefinition({ name })),
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    const first = await post(0, "Clustered Agent 1");
    const second = await post(2, "Clustered Agent 2");
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(JSON.stringify([first.body, second.body])).toMatch(/Agent_ID=CL-1\b.*Agent_ID=CL-2\b/);
  }, 120_000);
});

/** A loopback port nothing listens on: connections to it are refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}
