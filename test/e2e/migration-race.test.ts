import { mkdir } from "node:fs/promises";
import { connect, createServer, type Socket } from "node:net";
import { join } from "node:path";
import { createConnection } from "mysql2/promise";
import { describe, expect, it } from "vitest";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { mysqlConnectionOptions } from "../support/mysql-url.js";
import { type ServerProcess, spawnServer } from "../support/server-process.js";

const ROUNDS = 20;
const mariadb = testDatabases().find((d) => d.name === "mariadb")!;

/**
 * A TCP proxy between one service process and the database that can hold
 * the process back: its connections until `open()`, and a statement it sends
 * until a promise settles. It reads each client packet's text for that (a
 * MySQL COM_QUERY carries its statement as text).
 */
interface StatementGate {
  readonly url: string;
  /** Connections waiting for `open()`. */
  waiting(): number;
  /** Lets every connection through, now and from now on. */
  open(): void;
  /** Resolves once a statement matching `pattern` has been sent on to the database. */
  sent(pattern: RegExp): Promise<void>;
  /** Holds the first statement matching `pattern` until the promise `release()` returns (called then) settles. */
  hold(pattern: RegExp, release: () => Promise<unknown>): void;
  close(): Promise<void>;
}

async function statementGate(target: URL): Promise<StatementGate> {
  const held: Socket[] = [];
  const sockets = new Set<Socket>();
  const watchers: { pattern: RegExp; resolve: () => void }[] = [];
  const holds: { pattern: RegExp; release: () => Promise<unknown> }[] = [];
  let opened = false;

  const forward = (client: Socket): void => {
    const upstream = connect(Number(target.port || 3306), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.once("close", () => sockets.delete(s));
      s.on("error", () => s.destroy());
    }
    // Client packets go on in order; one held back holds back the ones behind it.
    let queue: Promise<unknown> = Promise.resolve();
    client.on("data", (chunk: Buffer) => {
      const text = chunk.toString("latin1");
      const holdIndex = holds.findIndex((h) => h.pattern.test(text));
      const release = holdIndex === -1 ? undefined : holds.splice(holdIndex, 1)[0]!.release();
      queue = queue
        .then(() => release?.catch(() => undefined))
        .then(() => {
          upstream.write(chunk);
          for (const w of watchers.filter((w) => w.pattern.test(text))) {
            watchers.splice(watchers.indexOf(w), 1);
            w.resolve();
          }
        });
    });
    upstream.pipe(client);
    client.once("close", () => upstream.destroy());
  };

  const server = createServer((client) => {
    if (opened) forward(client);
    else held.push(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = new URL(target);
  url.hostname = "127.0.0.1";
  url.port = String((server.address() as { port: number }).port);
  return {
    url: url.toString(),
    waiting: () => held.length,
    open() {
      opened = true;
      for (const client of held.splice(0)) forward(client);
    },
    sent: (pattern) => new Promise((resolve) => watchers.push({ pattern, resolve })),
    hold: (pattern, release) => void holds.push({ pattern, release }),
    async close() {
      for (const s of [...sockets, ...held]) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const within = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * How the two processes meet the fresh database in a round:
 * - together: their first statements reach it at the same moment, as when
 *   the database comes up after the processes (so both find knex's tables missing);
 * - one step behind: B starts when A has made knex's lock table, and A's
 *   insert of the lock row waits (at most 3 s) for B's: the interleaving in
 *   which both find that table empty and both insert a row. A waits no longer
 *   once B has asked for the migration lease A holds (B's conditional UPDATE of
 *   registry_migration_lock, src/storage/migrations/migration-lock.ts): B then
 *   inserts nothing until A has given the lease back, and the 3 s were spent
 *   for nothing in every such round (30 of the test's 100 s).
 */
type Schedule = "together" | "one step behind";

/**
 * Two service processes started at once on one fresh, empty MySQL database
 * both migrate it on start: both must come up, every time, and leave knex's
 * bookkeeping as one process would (one lock row, each migration once).
 */
describe.skipIf(mariadb.skip)("two processes starting at once on a fresh MariaDB database", () => {
  async function round(database: FreshDatabase, schedule: Schedule): Promise<ServerProcess[]> {
    const [a, b] = [
      await statementGate(new URL(database.databaseUrl!)),
      await statementGate(new URL(database.databaseUrl!)),
    ] as const;
    const servers: ServerProcess[] = [];
    try {
      if (schedule === "one step behind") {
        const bInserted = b.sent(/insert into `knex_migrations_lock`/);
        const bWaitsForLease = b.sent(/update `registry_migration_lock`/);
        a.hold(/insert into `knex_migrations_lock`/, () => Promise.race([bInserted, bWaitsForLease, within(3_000)]));
        void a.sent(/select \* from `knex_migrations_lock`/).then(() => b.open());
      }
      const starting = Promise.allSettled(
        [a, b].map(async (gate, i) => {
          // Each its own data dir: only the database is shared.
          const dataDir = join(database.dataDir, String(i));
          await mkdir(dataDir);
          const server = await spawnServer({ DATA_DIR: dataDir, DATABASE_URL: gate.url });
          servers.push(server);
          return server;
        }),
      );
      // Both processes are connecting to the database before either gets through.
      await expect.poll(() => a.waiting() > 0 && b.waiting() > 0, { timeout: 30_000 }).toBe(true);
      a.open();
      if (schedule === "together") b.open();
      const failed = (await starting)
        .filter((s): s is PromiseRejectedResult => s.status === "rejected")
        .map((s) => String(s.reason).slice(0, 1500));
      if (failed.length > 0) throw new Error(`${failed.length} of 2 did not come up:\n${failed.join("\n")}`);
      for (const server of servers) expect((await fetch(`${server.baseUrl}/readyz`)).status).toBe(200);
      return servers;
    } catch (error) {
      await Promise.all(servers.map((s) => s.stop()));
      throw error;
    } finally {
      await a.close();
      await b.close();
    }
  }

  it(
    `both come up, ${ROUNDS} rounds in a row`,
    async () => {
      for (let n = 1; n <= ROUNDS; n++) {
        const schedule: Schedule = n % 2 === 1 ? "together" : "one step behind";
        const database = await mariadb.create();
        try {
          const servers = await round(database, schedule).catch((error: unknown) => {
            throw new Error(`round ${n} (${schedule}): ${String(error)}`);
          });
          await Promise.all(servers.map((s) => s.stop()));
          const connection = await createConnection(mysqlConnectionOptions(database.databaseUrl!));
          try {
            const [locks] = (await connection.query("SELECT is_locked FROM knex_migrations_lock")) as [
              Array<{ is_locked: number }>,
              unknown,
            ];
            expect(locks, `round ${n} (${schedule})`).toEqual([{ is_locked: 0 }]);
            const [twice] = (await connection.query(
              "SELECT name FROM knex_migrations GROUP BY name HAVING COUNT(*) > 1",
            )) as [unknown[], unknown];
            expect(twice, `round ${n} (${schedule})`).toEqual([]);
          } finally {
            await connection.end();
          }
        } finally {
          await database.cleanup();
        }
      }
    },
    ROUNDS * 60_000,
  );
});
