import { describe, expect, it } from "vitest";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { barrier, definition, save } from "../storage/fixtures.js";
import { minimalDefinition } from "../support/definitions.js";
import { galeraSkipped, NODES, useGaleraDatabase } from "../support/galera.js";
import { useReplicas } from "../support/replicas.js";

/**
 * Issue 21, item 5: the registry's read-modify-writes through different nodes at once. Galera
 * certifies the rows a transaction wrote and nothing else; a `SELECT ... FOR UPDATE` locks its own
 * node only. So a decision read under a lock is safe across nodes only where the transaction then
 * writes the row it locked (docs/galera.md lists each one): these tests hold the cases a lost update
 * or a write skew would show in.
 */
describe.skipIf(galeraSkipped())("read-modify-writes through three nodes at once", () => {
  const db = useGaleraDatabase();
  const replicas = useReplicas(db, (d) => NODES.map((n) => d.url(n)));

  /** One REST call through replica i: its status, ETag and body. */
  const call = async (
    i: number,
    method: string,
    path: string,
    body: unknown,
    ifMatch?: string,
  ): Promise<{ status: number; etag: string | null; body: any }> => {
    const res = await fetch(`${replicas().servers[i]!.baseUrl}/api/asor/v1/default/agentDefinition${path}`, {
      method,
      headers: {
        "content-type": "application/json",
        authorization: replicas().authorization,
        ...(ifMatch === undefined ? {} : { "if-match": ifMatch }),
      },
      body: JSON.stringify(body),
    });
    return { status: res.status, etag: res.headers.get("etag"), body: await res.json() };
  };

  const created = async (name: string, version = "1.0.0") => {
    const answer = await call(0, "POST", "", minimalDefinition({ name, version }));
    expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    return { id: answer.body.id as string, etag: answer.etag as string, body: answer.body };
  };

  /** Every promise's value once all have settled (no request left running when one fails), or the first failure. */
  const settled = async <T>(promises: readonly Promise<T>[]): Promise<T[]> => {
    const results = await Promise.allSettled(promises);
    const failed = results.find((r) => r.status === "rejected");
    if (failed !== undefined) throw failed.reason;
    return results.map((r) => (r as PromiseFulfilledResult<T>).value);
  };

  /** Rows through node n once it has applied every commit it has seen (a causal read). */
  const causal = <T>(n: number, sql: string, params: unknown[] = []) =>
    db().query<T>(n, `SET STATEMENT wsrep_sync_wait = 1 FOR ${sql}`, params);

  it("six PUTs with the same If-Match through three nodes: exactly one wins, five answer 412", async () => {
    const versions = await settled(Array.from({ length: 8 }, (_, v) => created(`If-Match ${v}`)));
    const answers = await Promise.all(
      versions.map(({ id, etag }, v) =>
        Promise.all(
          Array.from({ length: 6 }, (_, w) =>
            call(
              w % 3,
              "PUT",
              `/${id}`,
              minimalDefinition({ name: `If-Match ${v}`, description: `writer ${w}` }),
              etag,
            ),
          ),
        ),
      ),
    );
    for (const [v, perVersion] of answers.entries()) {
      const statuses = perVersion.map((a) => a.status).sort();
      expect(statuses, `version ${v}: ${JSON.stringify(perVersion.map((a) => a.body?.code))}`).toEqual([
        200, 412, 412, 412, 412, 412,
      ]);
      const winner = perVersion.find((a) => a.status === 200)!;
      expect(winner.body.meta.revision).toBe(2);
      for (const n of NODES) {
        const [row] = await causal<Array<{ revision: number; document: Buffer }>>(
          n,
          "SELECT revision, document FROM agent_definitions WHERE id = ?",
          [versions[v]!.id],
        );
        expect(row?.revision, `version ${v} through node ${n}`).toBe(2);
        expect(JSON.parse(String(row?.document)).description).toBe(winner.body.description);
      }
    }
  }, 120_000);

  it("PUTs without If-Match through three nodes lose no update: each one its own revision", async () => {
    const versions = await settled(Array.from({ length: 8 }, (_, v) => created(`Unconditional ${v}`)));
    const answers = await Promise.all(
      versions.map(({ id }, v) =>
        Promise.all(
          Array.from({ length: 6 }, (_, w) =>
            call(w % 3, "PUT", `/${id}`, minimalDefinition({ name: `Unconditional ${v}`, description: `w${w}` })),
          ),
        ),
      ),
    );
    for (const [v, perVersion] of answers.entries()) {
      expect(perVersion.map((a) => a.status)).toEqual(Array(6).fill(200));
      // Each write read the revision the one before it left: 2..7, none answered twice.
      expect(perVersion.map((a) => a.body.meta.revision as number).sort((a, b) => a - b)).toEqual([2, 3, 4, 5, 6, 7]);
      const last = perVersion.find((a) => a.body.meta.revision === 7)!;
      for (const n of NODES) {
        const [row] = await causal<Array<{ revision: number; document: Buffer }>>(
          n,
          "SELECT revision, document FROM agent_definitions WHERE id = ?",
          [versions[v]!.id],
        );
        expect(row?.revision).toBe(7);
        expect(JSON.parse(String(row?.document)).description).toBe(last.body.description);
      }
    }
  }, 120_000);

  it("three PATCHes of one status with the same If-Match through three nodes: exactly one wins", async () => {
    const versions = await settled(Array.from({ length: 8 }, (_, v) => created(`Status If-Match ${v}`)));
    const answers = await Promise.all(
      versions.map(({ id, etag }) =>
        Promise.all(
          (["DEPRECATED", "DEACTIVATED", "DEPRECATED"] as const).map((status, i) =>
            call(i, "PATCH", `/${id}/status`, { status }, etag),
          ),
        ),
      ),
    );
    for (const [v, perVersion] of answers.entries()) {
      expect(perVersion.map((a) => a.status).sort(), `version ${v}`).toEqual([200, 412, 412]);
      const [row] = await causal<Array<{ revision: number; status: string }>>(
        1,
        "SELECT revision, status FROM agent_definitions WHERE id = ?",
        [versions[v]!.id],
      );
      expect(row).toEqual({ revision: 2, status: perVersion.find((a) => a.status === 200)!.body.meta.status });
    }
  }, 120_000);

  it("two writers of one agent's latest flag on two nodes, both past the agent's lock: one latest", async () => {
    // Agents whose versions are all DEACTIVATED: no version has the latest flag. A writer on node 1
    // reactivates version 1 while one on node 2 reactivates version 2 (or adds version 3), each held
    // after taking the agent's lock until the other has taken it too. The two share no written row but
    // the agent's (the counters' shards differ: seq % 16 of consecutive rows), so only a lock that is a
    // write keeps one of them from deciding on a snapshot that misses the other.
    const repositories = await Promise.all(
      [1, 2].map((n) => createSqlRepository({ databaseUrl: db().url(n), dataDir: db().dataDir })),
    );
    try {
      const [one, two] = repositories as [AgentDefinitionRepository, AgentDefinitionRepository];
      const agents = [];
      for (let a = 0; a < 6; a++) {
        const v1 = await created(`Dormant ${a}`, "1");
        const v2 = await created(`Dormant ${a}`, "2");
        const off = await call(0, "PATCH", `/${encodeURIComponent(v1.body.reference_id)}/status`, {
          status: "DEACTIVATED",
        });
        expect(off.status, JSON.stringify(off.body)).toBe(200);
        agents.push({ v1: v1.id, v2: v2.id, name: `Dormant ${a}`, newVersion: a % 2 === 1 });
      }
      await settled(
        agents.map(async ({ v1, v2, name, newVersion }) => {
          const bothLocked = barrier(2);
          /** Sets `id` ACTIVE through `repository`, held after the agent's lock on the first attempt. */
          const reactivate = (repository: AgentDefinitionRepository, id: string) => {
            let attempt = 0;
            return repository.write("default", async (tx) => {
              const named = await tx.findById(id);
              const versions = await tx.findVersionsForUpdate(named!.agent);
              if (++attempt === 1) await bothLocked();
              return tx.setStatus(
                versions.filter((v) => v.id === id),
                "ACTIVE",
                null,
              );
            });
          };
          await Promise.all([
            reactivate(one, v1),
            newVersion
              ? save(two, definition({ name, version: "3" }), "default", {
                  after: async (call, attempt) => {
                    if (call === "findAgentByName" && attempt === 1) await bothLocked();
                  },
                })
              : reactivate(two, v2),
          ]);
        }),
      );
      for (const n of NODES) {
        const rows = await causal<Array<{ name: string; latest: string | null; newest: string }>>(
          n,
          `SELECT name, GROUP_CONCAT(CASE WHEN is_latest THEN version END ORDER BY version) AS latest,
             MAX(CASE WHEN status <> 'DEACTIVATED' THEN version END) AS newest
           FROM agent_definitions WHERE name LIKE 'Dormant %' GROUP BY name ORDER BY name`,
        );
        expect(rows).toHaveLength(agents.length);
        // Exactly one latest per agent: its newest version that is not deactivated.
        for (const row of rows) expect({ ...row, through: n }).toEqual({ ...row, latest: row.newest, through: n });
      }
    } finally {
      await Promise.all(repositories.map((r) => r.close()));
    }
  }, 120_000);

  it("the list's counters equal COUNT(*) on every node after the concurrent runs", async () => {
    for (const n of NODES) {
      const counted = await causal<unknown[]>(
        n,
        `SELECT tenant, status, is_latest, COUNT(*) AS n FROM agent_definitions
         GROUP BY tenant, status, is_latest ORDER BY tenant, status, is_latest`,
      );
      const kept = await causal<unknown[]>(
        n,
        `SELECT tenant, status, is_latest, CAST(SUM(n) AS SIGNED) AS n FROM definition_counts
         GROUP BY tenant, status, is_latest HAVING SUM(n) <> 0 ORDER BY tenant, status, is_latest`,
      );
      expect(kept, `definition_counts through node ${n}`).toEqual(counted);
      const terms = await causal<unknown[]>(
        n,
        `SELECT tenant, kind, value, status, is_latest, COUNT(*) AS n FROM definition_terms
         GROUP BY tenant, kind, value, status, is_latest ORDER BY tenant, kind, value, status, is_latest`,
      );
      const termCounts = await causal<unknown[]>(
        n,
        `SELECT tenant, kind, value, status, is_latest, CAST(SUM(n) AS SIGNED) AS n FROM definition_term_counts
         GROUP BY tenant, kind, value, status, is_latest HAVING SUM(n) <> 0
         ORDER BY tenant, kind, value, status, is_latest`,
      );
      expect(termCounts, `definition_term_counts through node ${n}`).toEqual(terms);
    }
  }, 60_000);
});
