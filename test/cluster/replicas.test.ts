import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { migrations } from "../../src/storage/migrations/index.js";
import { galeraSkipped, NODES, useGaleraDatabase } from "../support/galera.js";
import { type ServerProcess, spawnServer } from "../support/server-process.js";

/**
 * Issue 21: replicas of the registry on a multi-primary Galera cluster, one per node, each migrating the
 * same database at start. A lock that only one node sees (GET_LOCK) lets them run the same migration at once.
 */
describe.skipIf(galeraSkipped())("replicas on the 3-node Galera cluster", () => {
  const db = useGaleraDatabase();

  it("three replicas started at once on a fresh database: all ready, migrations ran once", async () => {
    const servers: ServerProcess[] = [];
    try {
      // One replica per node, all started at the same moment, each with its own DATA_DIR.
      const started = await Promise.allSettled(
        NODES.map(async (n) => {
          const server = await spawnServer({ DATA_DIR: join(db().dataDir, `replica${n}`), DATABASE_URL: db().url(n) });
          servers.push(server);
          return server;
        }),
      );
      const failed = started.flatMap((s, i) =>
        s.status === "rejected" ? [`replica on node ${NODES[i]}: ${why(s.reason)}`] : [],
      );
      expect(failed, `${failed.length} of 3 replicas did not come up`).toEqual([]);
      for (const server of servers) expect((await fetch(`${server.baseUrl}/readyz`)).status).toBe(200);

      // Each migration recorded exactly once, seen the same through every node.
      for (const n of NODES) {
        const rows = await db().query<Array<{ name: string; times: number }>>(
          n,
          "SELECT name, COUNT(*) AS times FROM knex_migrations GROUP BY name ORDER BY name",
        );
        expect(rows, `knex_migrations through node ${n}`).toEqual(
          migrations.map((m) => ({ name: m.name, times: 1 })).sort((a, b) => a.name.localeCompare(b.name)),
        );
      }
    } finally {
      await Promise.all(servers.map((s) => s.stop()));
    }
  });
});

/** A start's failure on one line: the database's error (code and message) when there is one. */
function why(reason: unknown): string {
  const text = String(reason);
  const message = /sqlMessage: (['"])(.*?)\1,?\n/.exec(text)?.[2];
  const code = /code: '(\w+)'/.exec(text)?.[1];
  if (message !== undefined) return `${code}: ${message}`;
  return text
    .split("\n")
    .filter((line) => !/^\s+at /.test(line))
    .join(" ")
    .replace(/\s+/g, " ")
    .slice(0, 600);
}
