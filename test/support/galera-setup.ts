/**
 * Global setup of the cluster project (vitest.config.ts, test/cluster/*.test.ts): starts the 3-node
 * Galera cluster of scripts/cluster.mjs once for the run, or reuses one already Synced, and stops it
 * at the end when it started it. Without MariaDB, Galera or rsync the suite is skipped loudly, and
 * fails the run under CI (where a skipped suite would hide bugs).
 */
import type { TestProject } from "vitest/node";
import * as cluster from "../../scripts/cluster.mjs";

/** What the cluster test files get through `inject("galera")` (test/support/galera.ts reads it). */
export interface GaleraContext {
  /** The folder of the cluster (CLUSTER_DIR). */
  readonly dir: string;
  /** The SQL port of each node, node 1 first. */
  readonly sqlPorts: readonly number[];
}

declare module "vitest" {
  export interface ProvidedContext {
    /** The test cluster, or null when the cluster suite is skipped. */
    galera: GaleraContext | null;
  }
}

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const problem = cluster.missing();
  if (problem !== undefined) {
    if (process.env.CI === "true") throw new Error(`The cluster suite cannot run under CI: ${problem}.`);
    process.stderr.write(`\n*** Galera cluster suite SKIPPED: ${problem}. ***\n\n`);
    project.provide("galera", null);
    return undefined;
  }
  const before = await cluster.status();
  const startedHere = before.every((n) => n.pid === undefined);
  const began = Date.now();
  await cluster.start();
  if (startedHere)
    process.stderr.write(`galera: test cluster started in ${((Date.now() - began) / 1000).toFixed(1)} s\n`);
  project.provide("galera", {
    dir: cluster.clusterDir(),
    sqlPorts: cluster.NODES.map((n) => cluster.nodePorts(n).sql),
  });
  return startedHere ? () => cluster.stop() : undefined;
}
