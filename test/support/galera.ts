/**
 * The 3-node Galera test cluster for the files of test/cluster/ (the `cluster` project of
 * vitest.config.ts, whose global setup, test/support/galera-setup.ts, starts it or reuses a running
 * one, and stops it after the run when it started it). The files of that project run one at a time:
 * a file may kill and restart nodes.
 *
 *   describe.skipIf(galeraSkipped())("...", () => {
 *     const db = useGaleraDatabase();
 *     it("...", async () => {
 *       const env = { DATABASE_URL: db().url(2) };   // node 2
 *       await killNode(3); ...; await restartNode(3);
 *     });
 *   });
 *
 * Nodes are numbered 1..3 (NODES). scripts/cluster.mjs and docs/operations.md ("A test cluster")
 * tell how the cluster is set up.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createConnection } from "mysql2/promise";
import { afterAll, beforeAll, inject } from "vitest";
import * as cluster from "../../scripts/cluster.mjs";

/** The node numbers: 1, 2, 3. */
export const NODES: readonly number[] = cluster.NODES;

/** True when this run has no cluster (Galera not installed; never under CI): skip the suite. */
export function galeraSkipped(): boolean {
  return inject("galera") === null;
}

function context() {
  const galera = inject("galera");
  if (galera === null) throw new Error("No Galera cluster in this run; the suite should have been skipped.");
  return galera;
}

/** `mysql://root@127.0.0.1:<node n's SQL port>/<database>` */
export function nodeUrl(n: number, database = ""): string {
  const port = context().sqlPorts[n - 1];
  if (port === undefined) throw new Error(`no node ${n} (nodes are ${NODES.join(", ")})`);
  return `mysql://root@127.0.0.1:${port}/${database}`;
}

/** A database of one test file on the cluster (the same on every node: Galera replicates its creation). */
export interface GaleraDatabase {
  readonly name: string;
  /** The database through node n. */
  url(n: number): string;
  /** The database through every node, node 1 first. */
  readonly urls: readonly string[];
  /** A fresh temporary directory (for the servers' DATA_DIRs), removed at the end. */
  readonly dataDir: string;
  /** Runs one statement through node n and returns its rows. */
  query<T = unknown>(n: number, sql: string, params?: unknown[]): Promise<T>;
}

/** Runs one statement through node n (database `database`, or none) and returns its rows. */
export async function queryNode<T = unknown>(
  n: number,
  sql: string,
  params: unknown[] = [],
  database = "",
): Promise<T> {
  const connection = await createConnection({ uri: nodeUrl(n, database), connectTimeout: 3_000 });
  try {
    const [rows] = await connection.query(sql, params);
    return rows as T;
  } finally {
    await connection.end().catch(() => undefined);
  }
}

/** Resolves once node n has the database `name` (a causal read, again until it does); throws after 10 s. */
async function untilNodeHasDatabase(n: number, name: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const rows = await queryNode<unknown[]>(
      n,
      "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
      [name],
    );
    if (rows.length > 0) return;
    if (Date.now() > deadline) throw new Error(`Node ${n} has no database ${name} 10 s after it was created.`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * Creates a fresh, empty database on the cluster before the enclosing suite (through node 1, once all 3
 * nodes are Synced: it restarts any node left down) and drops it after; the returned function gives it to the tests.
 */
export function useGaleraDatabase(): () => GaleraDatabase {
  let db: GaleraDatabase | undefined;
  beforeAll(async () => {
    // A node an earlier file left down, or one that left the cluster and stays out, is started again:
    // every file begins with 3 Synced nodes, and a start that fails says why before the hook's 120 s.
    await cluster.start({ timeoutMs: 90_000 });
    const name = `asor_cluster_${randomBytes(6).toString("hex")}`;
    await queryNode(1, `CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`);
    // DDL through node 1 returns once node 1 has run it; the other nodes run it in the same order a moment
    // later (CI once connected to node 2 before it had: "Unknown database"). Each is asked, with a causal
    // read, until it has it.
    for (const n of NODES) await untilNodeHasDatabase(n, name);
    const dataDir = await mkdtemp(join(tmpdir(), "asor-cluster-test-"));
    db = {
      name,
      url: (n) => nodeUrl(n, name),
      urls: NODES.map((n) => nodeUrl(n, name)),
      dataDir,
      query: (n, sql, params) => queryNode(n, sql, params, name),
    };
  });
  afterAll(async () => {
    if (db === undefined) return;
    // Through a node that runs (a test may leave one down).
    const up = [];
    for (const n of NODES) if ((await cluster.nodeStatus(n))?.wsrep_ready === "ON") up.push(n);
    if (up[0] !== undefined) await queryNode(up[0], `DROP DATABASE IF EXISTS \`${db.name}\``);
    await rm(db.dataDir, { recursive: true, force: true });
  });
  return () => {
    if (db === undefined) throw new Error("The cluster database is only available inside tests of its suite.");
    return db;
  };
}

/**
 * The cluster's start as every file's beforeAll runs it (scripts/cluster.mjs `start`), with its times to hand:
 * what runs of the cluster is left, a node that runs but is not Synced within `graceMs` is killed and joins again.
 */
export function startCluster(options: { graceMs?: number; timeoutMs?: number } = {}): Promise<void> {
  return cluster.start(options);
}

/** What `start` wrote of the nodes it killed as strays ($CLUSTER_DIR/recoveries.log), or "" when none. */
export async function recoveries(): Promise<string> {
  return readFile(join(cluster.clusterDir(), "recoveries.log"), "utf8").catch(() => "");
}

/** kill -9 of node n's server; resolves once it is gone (the others drop it from the cluster ~5 s later). */
export function killNode(n: number): Promise<void> {
  return cluster.kill(n);
}

/** Starts node n again after killNode; resolves once it is Synced with the others (about 9 s). */
export function restartNode(n: number): Promise<void> {
  return cluster.restart(n);
}

/**
 * Node n's `SHOW GLOBAL STATUS LIKE 'wsrep_%'` (wsrep_ready, wsrep_cluster_size, ...), or undefined when it
 * is down.
 */
export function nodeStatus(n: number): Promise<Record<string, string> | undefined> {
  return cluster.nodeStatus(n);
}

/** Freezes (SIGSTOP) or thaws (SIGCONT) node n's server: a node that stops answering without closing anything. */
export async function signalNode(n: number, signal: "SIGSTOP" | "SIGCONT"): Promise<void> {
  const pid = Number((await readFile(join(cluster.clusterDir(), `node${n}`, "launched.pid"), "utf8")).trim());
  process.kill(pid, signal);
}
