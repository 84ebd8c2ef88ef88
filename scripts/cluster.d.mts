// Types of scripts/cluster.mjs for the TypeScript that imports it (test/support/galera.ts).

/** The node numbers of the test cluster: 1, 2, 3. */
export const NODES: readonly number[];
/** The Galera library the nodes load ($GALERA_PROVIDER or /usr/lib/galera/libgalera_smm.so). */
export const GALERA_PROVIDER: string;

/** The folder of the cluster: $CLUSTER_DIR or /tmp/asor-cluster. */
export function clusterDir(): string;
/** The ports of node n: SQL (3310 + n), Galera replication (4567 + 10 (n - 1)), IST and rsync SST (the next two). */
export function nodePorts(n: number): { sql: number; galera: number; ist: number; sst: number };
/** `mysql://root@127.0.0.1:<SQL port of node n>/<database>` */
export function nodeUrl(n: number, database?: string): string;
/** Why the cluster cannot run on this machine (no MariaDB, Galera or rsync), or undefined when it can. */
export function missing(): string | undefined;
/** Node n's `SHOW GLOBAL STATUS LIKE 'wsrep_%'` as name → value, or undefined when it does not answer. */
export function nodeStatus(n: number): Promise<Record<string, string> | undefined>;

/**
 * Starts what is not running of the cluster; resolves once all 3 nodes are Synced and ready in one primary
 * component, throws with a node's log after `timeoutMs` (default 100 s). A node that runs but is not Synced in
 * a primary component within `graceMs` (default 30 s) is killed and joins again by a full state transfer.
 */
export function start(options?: { clean?: boolean; timeoutMs?: number; graceMs?: number }): Promise<void>;
/**
 * Per node the last errors and events (views, shutdowns, crashes) of its error.log, and the nodes `start`
 * killed as strays.
 */
export function report(): string;
/** Stops every node (3, 2, then 1); `clean` also removes the folder. */
export function stop(options?: { clean?: boolean }): Promise<void>;
/** kill -9 of node n; resolves once the process is gone. */
export function kill(n: number): Promise<void>;
/** Starts node n again; resolves once it is Synced with the nodes that run. */
export function restart(n: number): Promise<void>;
/**
 * Per node: its ports, its server's pid (undefined when not running) and its wsrep status (undefined when it does
 * not answer).
 */
export function status(): Promise<
  Array<{
    node: number;
    ports: { sql: number; galera: number; ist: number; sst: number };
    pid: number | undefined;
    wsrep: Record<string, string> | undefined;
  }>
>;
