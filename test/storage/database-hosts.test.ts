import { createServer } from "node:net";
import { createConnection } from "mysql2/promise";
import { describe, expect, it, vi } from "vitest";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { testDatabases, useFreshDatabase } from "../support/databases.js";
import { mysqlConnectionOptions } from "../support/mysql-url.js";
import { createTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { definition, fromJsonBytes, save } from "./fixtures.js";

const mariadb = testDatabases()[1]!;

/** A loopback port nothing listens on: connections to it are refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * DATABASE_URL naming several hosts (the nodes of a Galera cluster, run/connection.ts): here one
 * MariaDB, reached directly and through proxies the test breaks.
 */
describe.skipIf(mariadb.skip)("a DATABASE_URL of several hosts, on MariaDB", () => {
  const target = useFreshDatabase(mariadb);

  /** The fresh database's URL with `hosts` (host:port, in order) in place of its one host. */
  const through = (...hosts: string[]) => {
    const url = new URL(target().databaseUrl!);
    return target().databaseUrl!.replace(url.host, hosts.join(","));
  };
  const direct = () => new URL(target().databaseUrl!).host;

  async function withProxy(
    use: (proxy: TcpProxy, open: (timeoutMs?: number) => Promise<AgentDefinitionRepository>) => Promise<void>,
  ): Promise<void> {
    const url = new URL(target().databaseUrl!);
    const proxy = await createTcpProxy({ host: url.hostname, port: Number(url.port || 3306) });
    const repos: AgentDefinitionRepository[] = [];
    try {
      await use(proxy, async (timeoutMs) => {
        const repo = await createSqlRepository({
          ...target(),
          databaseUrl: through(`127.0.0.1:${proxy.port}`, direct()),
          timeoutMs,
        });
        repos.push(repo);
        return repo;
      });
    } finally {
      for (const repo of repos) await repo.close();
      await proxy.close();
    }
  }

  it("passes over a host that refuses connections and reads and writes through the next", async () => {
    const repo = await createSqlRepository({
      ...target(),
      databaseUrl: through(`127.0.0.1:${await closedPort()}`, direct()),
    });
    try {
      const saved = await save(repo, definition({ name: "Through the second host" }));
      expect((await repo.get("default", saved.stored.id))?.id).toBe(saved.stored.id);
      await expect(repo.ping()).resolves.toBeUndefined();
    } finally {
      await repo.close();
    }
  });

  it("moves to the next host when its host goes away, for reads and writes, without a restart", async () => {
    await withProxy(async (proxy, open) => {
      const repo = await open();
      const first = await save(repo, definition({ name: "Before the cut" }));
      await proxy.cut();
      // The pooled connections through the proxy fail; the read is tried again on the next host.
      expect((await repo.get("default", first.stored.id))?.id).toBe(first.stored.id);
      const second = await save(repo, definition({ name: "After the cut" }));
      expect(second.stored.agent.number).toBe(first.stored.agent.number + 1);
      await expect(repo.ping()).resolves.toBeUndefined();
    });
  });

  it("moves to the next host when its host stops answering, once its timeout has passed", async () => {
    await withProxy(async (proxy, open) => {
      const repo = await open(1_000);
      const first = await save(repo, definition({ name: "Before the stall" }));
      proxy.stall();
      expect((await repo.get("default", first.stored.id))?.id).toBe(first.stored.id);
      const second = await save(repo, definition({ name: "After the stall" }));
      expect((await repo.get("default", second.stored.id))?.id).toBe(second.stored.id);
    });
  });

  it("is not ready while a table cannot be read, though SELECT 1 answers", async () => {
    const repo = await createSqlRepository(target());
    const admin = await createConnection(mysqlConnectionOptions(target().databaseUrl!));
    try {
      await expect(repo.ping()).resolves.toBeUndefined();
      await admin.query("RENAME TABLE tenants TO tenants_away");
      await expect(repo.ping()).rejects.toMatchObject({ code: "UNAVAILABLE" });
    } finally {
      await admin.query("RENAME TABLE tenants_away TO tenants").catch(() => undefined);
      await admin.end();
      await repo.close();
    }
  });
});

/**
 * DATABASE_WRITE_URL (single-writer on a Galera cluster): writes, a tenant's creation and the migrations
 * go to its hosts, everything else to DATABASE_URL's. Here both name one MariaDB, each through a proxy
 * the test cuts.
 */
describe.skipIf(mariadb.skip)("a DATABASE_WRITE_URL beside DATABASE_URL, on MariaDB", () => {
  const target = useFreshDatabase(mariadb);

  it("migrates and writes through the write URL's host, and reads through the other", async () => {
    const url = new URL(target().databaseUrl!);
    const server = { host: url.hostname, port: Number(url.port || 3306) };
    const reads = await createTcpProxy(server);
    const writes = await createTcpProxy(server);
    let repo: AgentDefinitionRepository | undefined;
    try {
      // Reads refused from the start: the migrations (on a fresh database) go through the writes' host.
      await reads.cut();
      repo = await createSqlRepository({
        ...target(),
        databaseUrl: reads.via(target().databaseUrl!),
        databaseWriteUrl: writes.via(target().databaseUrl!),
        timeoutMs: 2_000,
      });
      const saved = await save(repo, definition({ name: "Written while reads are cut" }));
      await repo.createTenant("written-while-reads-are-cut", "W-");
      await expect(repo.get("default", saved.stored.id)).rejects.toMatchObject({ code: "UNAVAILABLE" });
      await expect(repo.ping()).rejects.toMatchObject({ code: "UNAVAILABLE" });

      await reads.restore();
      await writes.cut();
      expect((await repo.get("default", saved.stored.id))?.id).toBe(saved.stored.id);
      expect((await repo.getTenant("written-while-reads-are-cut"))?.sequencePrefix).toBe("W-");
      await expect(repo.ping()).resolves.toBeUndefined();
      await expect(save(repo, definition({ name: "Written while writes are cut" }))).rejects.toMatchObject({
        code: "UNAVAILABLE",
      });
      await expect(repo.createTenant("created-while-writes-are-cut", null)).rejects.toMatchObject({
        code: "UNAVAILABLE",
      });
    } finally {
      await repo?.close();
      await reads.close();
      await writes.close();
    }
  });

  it("counts every write run again, by cause, for the metrics", async () => {
    // A lock wait timeout is the one cause a test can bring about for certain: another session holds
    // the definition's row, the write waits out innodb_lock_wait_timeout (2 s for a 4 s write budget) and runs
    // again, and the row is let go once the metrics count it. Ten writers of one new key no longer race
    // on a duplicate key: the staged insert waits on the tenant's sequence row instead (item 2 of #24).
    const repo = await createSqlRepository({ ...target(), timeoutMs: 4_000 });
    const admin = await createConnection(mysqlConnectionOptions(target().databaseUrl!));
    try {
      expect(Object.values(repo.writeRetries()).every((count) => count === 0)).toBe(true);
      await save(repo, definition({ name: "Held" }));
      await admin.query("BEGIN");
      await admin.query("SELECT id FROM agent_definitions WHERE tenant = 'default' FOR UPDATE");
      const written = save(repo, definition({ name: "Held", description: "written after the wait" }));
      await vi.waitFor(() => expect(repo.writeRetries().lock_wait_timeout).toBeGreaterThan(0), {
        timeout: 10_000,
        interval: 20,
      });
      await admin.query("COMMIT");
      const saved = await written;
      expect(saved.attempts).toBeGreaterThan(1);
      expect(fromJsonBytes(saved.stored).description).toBe("written after the wait");
      const retries = repo.writeRetries();
      expect(retries.certification, "no cluster here").toBe(0);
      expect(retries.deadlock + retries.duplicate_key + retries.busy + retries.node_failed).toBe(0);
    } finally {
      await admin.query("ROLLBACK").catch(() => undefined);
      await admin.end();
      await repo.close();
    }
  });
});
