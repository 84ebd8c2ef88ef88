/**
 * The bench's own database, made fresh for a run and dropped after it:
 * a MariaDB database (`asor_bench` unless told otherwise) or an embedded
 * SQLite file in the run's temporary data dir. Never another one.
 */
import { createConnection } from "mysql2/promise";
import { createSqlRepository } from "../src/storage/sql-repository.js";

export interface BenchDatabase {
  readonly kind: "mariadb" | "sqlite";
  /** The service's DATABASE_URL; undefined for SQLite (the service then uses DATA_DIR). */
  readonly databaseUrl: string | undefined;
  /** For the report; never a password. */
  readonly description: string;
  /** Drops the MariaDB database (SQLite's file goes with the data dir). */
  drop(): Promise<void>;
}

const safeName = /^[a-z][a-z0-9_]{0,63}$/;

/**
 * Makes the database, migrates it and sets up `tenant` with an agent id
 * sequence. `serverUrl` is a mysql:// URL without a database; undefined means SQLite in `dataDir`.
 */
export async function createBenchDatabase(options: {
  readonly serverUrl: string | undefined;
  readonly name: string;
  readonly dataDir: string;
  readonly tenant: string;
  readonly sequencePrefix: string;
  /** Keep the MariaDB database and its tenant when they exist (a run kept with --keep): seeding tops it up. */
  readonly reuse?: boolean;
}): Promise<BenchDatabase> {
  let reused = false;
  let database: BenchDatabase;
  if (options.serverUrl === undefined) {
    database = {
      kind: "sqlite",
      databaseUrl: undefined,
      description: `SQLite in ${options.dataDir}`,
      drop: async () => undefined,
    };
  } else {
    if (!safeName.test(options.name))
      throw new Error(`Refusing the database name "${options.name}": lowercase letters, digits and _ only.`);
    const server = new URL(options.serverUrl);
    const connect = () =>
      createConnection({
        host: server.hostname,
        port: Number(server.port || 3306),
        user: decodeURIComponent(server.username),
        password: decodeURIComponent(server.password),
      });
    const admin = await connect();
    try {
      const [existing] = await admin.query(
        "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
        [options.name],
      );
      reused = options.reuse === true && (existing as unknown[]).length > 0;
      if (!reused) {
        await admin.query(`DROP DATABASE IF EXISTS \`${options.name}\``);
        await admin.query(`CREATE DATABASE \`${options.name}\` CHARACTER SET utf8mb4`);
      }
    } finally {
      await admin.end();
    }
    const url = new URL(options.serverUrl);
    url.pathname = `/${options.name}`;
    const version = await connect().then(async (c) => {
      const [rows] = await c.query("SELECT VERSION() AS v");
      await c.end();
      return String((rows as { v: string }[])[0]?.v);
    });
    database = {
      kind: "mariadb",
      databaseUrl: url.href,
      description: `MariaDB ${version} at ${url.host}, database ${options.name}`,
      async drop() {
        const c = await connect();
        try {
          await c.query(`DROP DATABASE IF EXISTS \`${options.name}\``);
        } finally {
          await c.end();
        }
      },
    };
  }
  const repository = await createSqlRepository({ databaseUrl: database.databaseUrl, dataDir: options.dataDir });
  try {
    if (!(reused && (await repository.getTenant(options.tenant)) !== undefined))
      await repository.createTenant(options.tenant, options.sequencePrefix);
  } finally {
    await repository.close();
  }
  return database;
}

/**
 * Waits until nothing of the last scenario still runs in the database: a
 * request the load generator gave up on (or that outlived the measured
 * window) keeps its query running after the client has gone, and the
 * service may still hold more of them queued for a pooled connection; they
 * would load the next scenario. Waits for a second without any query in the
 * bench's database, killing those that have run for `graceSeconds` (only
 * queries in the bench's own database, never another's). Resolves with how
 * many were killed. SQLite runs inside the service: nothing to wait for.
 */
export async function settleDatabase(
  database: BenchDatabase,
  serverUrl: string | undefined,
  name: string,
  graceSeconds = 2,
): Promise<number> {
  if (database.kind !== "mariadb" || serverUrl === undefined) return 0;
  const server = new URL(serverUrl);
  const c = await createConnection({
    host: server.hostname,
    port: Number(server.port || 3306),
    user: decodeURIComponent(server.username),
    password: decodeURIComponent(server.password),
  });
  let killed = 0;
  try {
    const deadline = Date.now() + 120_000;
    for (let quiet = 0; quiet < 10 && Date.now() < deadline; ) {
      const [rows] = await c.query(
        "SELECT ID AS id, TIME AS seconds FROM information_schema.PROCESSLIST WHERE DB = ? AND COMMAND = 'Query' " +
          "AND ID <> CONNECTION_ID()",
        [name],
      );
      const running = rows as { id: number; seconds: number }[];
      quiet = running.length === 0 ? quiet + 1 : 0;
      for (const query of running.filter((q) => Number(q.seconds) >= graceSeconds)) {
        await c.query(`KILL QUERY ${Number(query.id)}`).catch(() => undefined);
        killed++;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return killed;
  } finally {
    await c.end();
  }
}
