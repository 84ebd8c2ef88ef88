/**
 * A MariaDB server of a test's own: its own data directory, port and socket,
 * so the test can kill, stall and restart it without touching the shared
 * server on 3306.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { createConnection } from "mysql2/promise";

/** Where the server binaries are, or undefined when MariaDB is not installed. */
export function mariadbBinaries(): { server: string; installDb: string } | undefined {
  const server = ["/usr/sbin/mariadbd", "/usr/bin/mariadbd", "/usr/local/bin/mariadbd"].find(existsSync);
  const installDb = [
    "/usr/bin/mariadb-install-db",
    "/usr/local/bin/mariadb-install-db",
    "/usr/bin/mysql_install_db",
  ].find(existsSync);
  return server === undefined || installDb === undefined ? undefined : { server, installDb };
}

export interface MariadbInstance {
  readonly port: number;
  /** `mysql://root@127.0.0.1:<port>/<database>` */
  url(database: string): string;
  /** Runs SQL as root (the server must be up). */
  query<T = unknown>(sql: string): Promise<T>;
  /** SIGKILL: the server is gone at once, as in a crash; InnoDB recovers committed work on the next start. */
  kill(): Promise<void>;
  /** SIGSTOP, resolving once the server has stopped: connections stay open and nothing answers. */
  pause(): Promise<void>;
  /** SIGCONT after pause(). */
  resume(): void;
  /** Starts the server again on the same port and data. */
  start(): Promise<void>;
  /** Stops the server (SIGKILL) and removes its data. */
  destroy(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (typeof address !== "object" || address === null) throw new Error("no free port");
  return address.port;
}

/** Creates a data directory with mariadb-install-db and starts a server on it (root, no password). */
export async function startMariadbInstance(): Promise<MariadbInstance> {
  const binaries = mariadbBinaries();
  if (binaries === undefined) throw new Error("MariaDB is not installed (mariadbd, mariadb-install-db)");
  const dir = await mkdtemp(join(tmpdir(), "asor-mariadb-"));
  const dataDir = join(dir, "data");
  const user = userInfo().username;
  await promisify(execFile)(binaries.installDb, [
    "--no-defaults",
    `--datadir=${dataDir}`,
    `--user=${user}`,
    "--auth-root-authentication-method=normal",
    "--skip-test-db",
  ]);
  const port = await freePort();
  let child: ChildProcess | undefined;
  const log: string[] = [];

  const options = { host: "127.0.0.1", port, user: "root", connectTimeout: 2_000 };
  const ready = async (): Promise<void> => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        const connection = await createConnection(options);
        await connection.end();
        return;
      } catch (error) {
        if (child?.exitCode !== null || Date.now() > deadline)
          throw new Error(`mariadbd did not come up on ${port}: ${String(error)}\n${log.join("").slice(-2000)}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  };

  const start = async (): Promise<void> => {
    child = spawn(
      binaries.server,
      [
        "--no-defaults",
        `--datadir=${dataDir}`,
        `--port=${port}`,
        `--socket=${join(dir, "mariadb.sock")}`,
        `--pid-file=${join(dir, "mariadb.pid")}`,
        "--bind-address=127.0.0.1",
        `--user=${user}`,
        "--skip-name-resolve",
        "--innodb-buffer-pool-size=32M",
        // Durable commits (the default, stated): a COMMIT that answered OK survives a SIGKILL.
        "--innodb-flush-log-at-trx-commit=1",
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    child.stderr?.on("data", (chunk: Buffer) => log.push(chunk.toString()));
    await ready();
  };

  const stop = async (): Promise<void> => {
    const running = child;
    if (running === undefined || running.exitCode !== null || running.signalCode !== null) return;
    const exited = new Promise((resolve) => running.once("exit", resolve));
    running.kill("SIGCONT");
    running.kill("SIGKILL");
    await exited;
  };

  await start();
  return {
    port,
    url: (database) => `mysql://root@127.0.0.1:${port}/${database}`,
    async query<T>(sql: string) {
      const connection = await createConnection(options);
      try {
        const [rows] = await connection.query(sql);
        return rows as T;
      } finally {
        await connection.end();
      }
    },
    kill: stop,
    async pause() {
      const pid = child?.pid;
      if (pid === undefined) return;
      child?.kill("SIGSTOP");
      // The signal is asynchronous: wait until the kernel shows the process stopped ("T").
      for (let i = 0; i < 200; i++) {
        const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
        if (/\) T /.test(stat) || stat === "") return;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    },
    resume: () => void child?.kill("SIGCONT"),
    start,
    async destroy() {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
