import { describe, expect, it } from "vitest";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, testDatabases, useFreshDatabase } from "../support/databases.js";
import { createTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";

const gone = { code: "UNAVAILABLE" };

forEachDatabase((db) => {
  const target = useFreshDatabase(db);

  it("pings a reachable database", async () => {
    const repo = await createSqlRepository(target());
    try {
      await expect(repo.ping()).resolves.toBeUndefined();
      // Concurrent pings share one query and all resolve.
      await expect(Promise.all([repo.ping(), repo.ping(), repo.ping()])).resolves.toHaveLength(3);
    } finally {
      await repo.close();
    }
  });
});

const mariadb = testDatabases()[1]!;

describe.skipIf(mariadb.skip)("ping on MariaDB that goes away", () => {
  const target = useFreshDatabase(mariadb);

  /** A repository that reaches the database through a proxy the test controls. */
  async function behindProxy(): Promise<{ repo: AgentDefinitionRepository; proxy: TcpProxy }> {
    const url = new URL(target().databaseUrl!);
    const proxy = await createTcpProxy({ host: url.hostname, port: Number(url.port || 3306) });
    const repo = await createSqlRepository({ ...target(), databaseUrl: proxy.via(target().databaseUrl!) });
    await repo.ping();
    return { repo, proxy };
  }

  const pingState = (repo: AgentDefinitionRepository) => () =>
    repo.ping().then(
      () => "up",
      () => "down",
    );

  it("throws UNAVAILABLE while the server is gone, and resolves once it is back", async () => {
    const { repo, proxy } = await behindProxy();
    try {
      await proxy.cut();
      await expect(repo.ping()).rejects.toMatchObject(gone);
      await proxy.restore();
      await expect.poll(pingState(repo), { timeout: 10_000 }).toBe("up");
    } finally {
      await repo.close();
      await proxy.close();
    }
  });

  it("gives up after its time bound on a server that stops answering, and recovers when it answers again", async () => {
    const { repo, proxy } = await behindProxy();
    try {
      proxy.stall();
      const started = performance.now();
      await expect(repo.ping()).rejects.toMatchObject(gone);
      const waited = performance.now() - started;
      // The bound is 2 s: well below MySQL's 5 s connect timeout, and nothing else would end a hung query.
      expect(waited).toBeGreaterThan(1_500);
      expect(waited).toBeLessThan(3_500);
      // The hung query is left behind: a later ping asks again instead of waiting on it.
      await proxy.restore();
      await expect.poll(pingState(repo), { timeout: 15_000, interval: 200 }).toBe("up");
    } finally {
      await proxy.close();
      await repo.close();
    }
  });
});
