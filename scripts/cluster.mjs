// A 3-node MariaDB Galera cluster on loopback, for tests and for trying the registry on a cluster:
//
//   npm run cluster -- start [--clean]   starts the nodes (node 1 bootstraps), waits for 3 Synced nodes
//   npm run cluster -- stop [--clean]    stops them (3, 2, then 1); --clean also removes the folder
//   npm run cluster -- status            one line per node
//   npm run cluster -- report            status, and the lines of each node's log that tell of trouble
//   npm run cluster -- kill <n>          kill -9 of node n
//   npm run cluster -- restart <n>       starts node n again (it rejoins), waits until it is Synced
//
// Everything lives in $CLUSTER_DIR (default /tmp/asor-cluster): node<n>/data, node<n>/my.cnf,
// node<n>/error.log, node<n>/mariadb.sock and .pid. Node n listens for SQL on 127.0.0.1:(3310 + n)
// as root with no password; Galera uses 4567 + 10 (n - 1), IST the next port and rsync SST the one after.
// When run as root the nodes run as the `mysql` user (the folder is given to it). See docs/operations.md.
import { execFile, spawn } from "node:child_process";
import { existsSync, openSync, readFileSync } from "node:fs";
import { chown, lstat, mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { userInfo } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { createConnection } from "mysql2/promise";

/** The nodes of the cluster, numbered from 1. */
export const NODES = [1, 2, 3];
export const GALERA_PROVIDER = process.env.GALERA_PROVIDER ?? "/usr/lib/galera/libgalera_smm.so";

/** The folder of the cluster: $CLUSTER_DIR or /tmp/asor-cluster. */
export function clusterDir() {
  return resolve(process.env.CLUSTER_DIR ?? "/tmp/asor-cluster");
}

/** $CLUSTER_PORT_OFFSET (default 0): added to every port, so that two clusters can run on one machine. */
function portOffset() {
  const offset = Number(process.env.CLUSTER_PORT_OFFSET ?? 0);
  if (!Number.isInteger(offset) || offset < 0 || offset > 1000)
    throw new Error(`CLUSTER_PORT_OFFSET must be an integer from 0 to 1000, not ${process.env.CLUSTER_PORT_OFFSET}`);
  return offset;
}

/** The ports of node n: SQL, Galera replication, IST and SST. */
export function nodePorts(n) {
  const galera = 4567 + 10 * (n - 1) + portOffset();
  return { sql: 3310 + n + portOffset(), galera, ist: galera + 1, sst: galera + 2 };
}

/** `mysql://root@127.0.0.1:<sql port of node n>/<database>` */
export function nodeUrl(n, database = "") {
  return `mysql://root@127.0.0.1:${nodePorts(n).sql}/${database}`;
}

const SERVER = ["/usr/sbin/mariadbd", "/usr/bin/mariadbd", "/usr/local/bin/mariadbd"].find(existsSync);
const INSTALL_DB = [
  "/usr/bin/mariadb-install-db",
  "/usr/local/bin/mariadb-install-db",
  "/usr/bin/mysql_install_db",
].find(existsSync);

/** Why the cluster cannot run on this machine, or undefined when it can. */
export function missing() {
  if (SERVER === undefined || INSTALL_DB === undefined)
    return "MariaDB is not installed (mariadbd, mariadb-install-db)";
  if (!existsSync(GALERA_PROVIDER)) return `no Galera provider at ${GALERA_PROVIDER} (apt-get install galera-4)`;
  const path = (process.env.PATH ?? "").split(":");
  for (const tool of ["rsync", "wsrep_sst_rsync"])
    if (!path.some((dir) => existsSync(join(dir, tool)))) return `${tool} is not on PATH (apt-get install rsync)`;
  return undefined;
}

const nodeDir = (n) => join(clusterDir(), `node${n}`);
const pidFile = (n) => join(nodeDir(n), "mariadb.pid");
// The pid of the mariadbd this script started (the server writes its pid file only once it is up).
const launchedFile = (n) => join(nodeDir(n), "launched.pid");
// Under root the server, its SST script and rsync run as mysql; otherwise as whoever runs this.
const runAs = () => (process.getuid?.() === 0 ? "mysql" : userInfo().username);

function config(n) {
  const ports = nodePorts(n);
  const dir = nodeDir(n);
  const members = NODES.map((m) => `127.0.0.1:${nodePorts(m).galera}`).join(",");
  const providerOptions =
    `base_host=127.0.0.1; base_port=${ports.galera}; gmcast.listen_addr=tcp://127.0.0.1:${ports.galera}; ` +
    `ist.recv_addr=127.0.0.1:${ports.ist}; gcache.size=32M`;
  return `# Written by scripts/cluster.mjs: node ${n} of the test cluster.
[mysqld]
user = ${runAs()}
datadir = ${join(dir, "data")}
tmpdir = ${join(dir, "tmp")}
socket = ${join(dir, "mariadb.sock")}
pid-file = ${pidFile(n)}
log-error = ${join(dir, "error.log")}
port = ${ports.sql}
bind-address = 127.0.0.1
skip-name-resolve
# Small: three nodes share a machine with everything else.
innodb_buffer_pool_size = 32M
innodb_log_file_size = 16M
performance_schema = OFF
max_connections = 200
# What Galera needs, and what the registry needs of a cluster (docs/operations.md).
binlog_format = ROW
default_storage_engine = InnoDB
innodb_autoinc_lock_mode = 2
innodb_flush_log_at_trx_commit = 1
# The registry's migrations create triggers: on Galera that needs this even with binary logging off.
log_bin_trust_function_creators = 1
# Migration 0009 builds its FULLTEXT index without stopwords; DDL replicated to the other nodes is
# applied with their server settings, not the migrating session's, so every node needs this.
innodb_ft_enable_stopword = OFF
wsrep_on = ON
wsrep_provider = ${GALERA_PROVIDER}
wsrep_cluster_name = asor-test-cluster
wsrep_cluster_address = gcomm://${members}
wsrep_node_name = node${n}
wsrep_node_address = 127.0.0.1:${ports.galera}
wsrep_provider_options = "${providerOptions}"
wsrep_sst_method = rsync
wsrep_sst_receive_address = 127.0.0.1:${ports.sst}
wsrep_slave_threads = 2
`;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The pid of node n's server while it runs (not a zombie, not a reused pid), else undefined. */
function pidOf(n) {
  try {
    const pid = Number(readFileSync(launchedFile(n), "utf8").trim());
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    if (/\) Z /.test(stat) || !readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(nodeDir(n))) return undefined;
    return pid;
  } catch {
    return undefined;
  }
}

async function query(n, sql, timeoutMs = 2_000) {
  const connection = await createConnection({
    host: "127.0.0.1",
    port: nodePorts(n).sql,
    user: "root",
    connectTimeout: timeoutMs,
  });
  try {
    const [rows] = await connection.query(sql);
    return rows;
  } finally {
    await connection.end().catch(() => undefined);
  }
}

/** The wsrep status of node n ({ wsrep_ready, wsrep_cluster_size, wsrep_local_state_comment, ... }), or undefined. */
export async function nodeStatus(n) {
  try {
    const rows = await query(n, "SHOW GLOBAL STATUS LIKE 'wsrep_%'");
    return Object.fromEntries(rows.map((r) => [r.Variable_name, r.Value]));
  } catch {
    return undefined;
  }
}

function tail(n) {
  try {
    return readFileSync(join(nodeDir(n), "error.log"), "utf8")
      .split("\n")
      .slice(-25)
      .join("\n");
  } catch {
    return "(no error.log)";
  }
}

/** True when a node's wsrep status says Synced and ready in a primary component. */
function synced(s) {
  return s?.wsrep_ready === "ON" && s.wsrep_local_state_comment === "Synced" && s.wsrep_cluster_status === "Primary";
}

/** A node's wsrep state in a few words, for messages. */
function describe(s) {
  if (s === undefined) return "not answering";
  return (
    `${s.wsrep_local_state_comment}, ready ${s.wsrep_ready}, ` +
    `cluster ${s.wsrep_cluster_status} of ${s.wsrep_cluster_size}`
  );
}

// The lines of a node's error.log that tell of trouble: errors (a write set it could not apply names the
// statement and the error) and Galera's inconsistency voting; and, apart, the events a test may cause on
// purpose (views that were not primary, shutdowns, crashes), which would crowd the errors out.
const ERRORS = /\[ERROR\]|apply failed|inconsisten/i;
const EVENTS = /non-primary|aborting|got signal|shutdown|SST failed/i;

/** The last `count` lines of node n's error.log that `pattern` matches. */
function logLines(n, pattern, count) {
  try {
    const lines = readFileSync(join(nodeDir(n), "error.log"), "utf8").split("\n");
    return lines.filter((line) => pattern.test(line)).slice(-count);
  } catch {
    return ["(no error.log)"];
  }
}

/** Waits until node n answers Synced and ready in a primary component of `size` nodes; throws at `deadline`. */
async function waitSynced(n, size, deadline = Date.now() + 120_000) {
  for (;;) {
    const s = await nodeStatus(n);
    if (synced(s) && Number(s.wsrep_cluster_size) >= size) return;
    if (pidOf(n) === undefined) throw new Error(`node ${n} is not running:\n${tail(n)}`);
    if (Date.now() > deadline) throw new Error(`node ${n} not Synced in time (${describe(s)}):\n${tail(n)}`);
    await sleep(200);
  }
}

async function install(n) {
  const dir = nodeDir(n);
  await mkdir(join(dir, "tmp"), { recursive: true });
  await writeFile(join(dir, "my.cnf"), config(n));
  if (existsSync(join(dir, "data", "mysql"))) return;
  await promisify(execFile)(INSTALL_DB, [
    "--no-defaults",
    `--datadir=${join(dir, "data")}`,
    `--user=${runAs()}`,
    "--auth-root-authentication-method=normal",
    "--skip-test-db",
  ]);
}

async function giveFolder() {
  if (process.getuid?.() !== 0) return;
  const { uid, gid } = await mysqlIds();
  const walk = async (path) => {
    await chown(path, uid, gid);
    if (!(await lstat(path)).isDirectory()) return;
    for (const entry of await readdir(path)) await walk(join(path, entry));
  };
  await walk(clusterDir());
}

async function mysqlIds() {
  const line = (await readFile("/etc/passwd", "utf8")).split("\n").find((l) => l.startsWith("mysql:"));
  if (line === undefined) throw new Error("no mysql user to run the nodes as (useradd mysql, or run as another user)");
  const [, , uid, gid] = line.split(":");
  return { uid: Number(uid), gid: Number(gid) };
}

/** Starts node n's server in the background; `bootstrap` makes it a new cluster of its own. */
async function launch(n, bootstrap) {
  const dir = nodeDir(n);
  if (bootstrap) {
    // A cluster stopped in order (stop) marks its last node safe; after a kill -9 of all, node 1 is declared so.
    const grastate = join(dir, "data", "grastate.dat");
    if (existsSync(grastate)) {
      const text = await readFile(grastate, "utf8");
      await writeFile(grastate, text.replace(/safe_to_bootstrap:\s*0/, "safe_to_bootstrap: 1"));
    }
  }
  const log = openSync(join(dir, "server.out"), "a");
  const child = spawn(
    SERVER,
    [`--defaults-file=${join(dir, "my.cnf")}`, ...(bootstrap ? ["--wsrep-new-cluster"] : [])],
    { detached: true, stdio: ["ignore", log, log] },
  );
  child.unref();
  await writeFile(launchedFile(n), `${child.pid}\n`);
}

/**
 * Starts the cluster (or what is not running of it) and resolves once every node is Synced in a cluster of 3;
 * throws, with the end of the log of the node it waited for, after `timeoutMs` (below the cluster tests' hook
 * timeout, so that the log reaches the report). A node that runs but is not Synced in a primary component
 * within `graceMs` is killed and started again by a full state transfer (`strays`).
 */
export async function start({ clean = false, timeoutMs = 100_000, graceMs = 30_000 } = {}) {
  const problem = missing();
  if (problem !== undefined) throw new Error(`cannot start the test cluster: ${problem}`);
  const deadline = Date.now() + timeoutMs;
  if (clean) await stop({ clean: true });
  await mkdir(clusterDir(), { recursive: true });
  for (const n of NODES) await install(n);
  await giveFolder();
  await strays(graceMs);
  const running = NODES.filter((n) => pidOf(n) !== undefined);
  if (running.length === 0) {
    await launch(1, true);
    await waitSynced(1, 1, deadline);
  }
  // Joiners one at a time: each takes its state (SST or IST) from a Synced donor, once the nodes that run
  // have dropped a killed one (a node back before that takes about 20 s to be let in).
  for (const n of NODES) {
    if (pidOf(n) !== undefined) continue;
    const others = NODES.filter((m) => pidOf(m) !== undefined);
    for (const m of others) await waitView(m, others.length, deadline);
    await launch(n, false);
    await waitSynced(n, 1, deadline);
  }
  for (const n of NODES) await waitSynced(n, NODES.length, deadline);
}

/**
 * Kills the nodes that run but are not Synced in a primary component within `graceMs` (one joining or
 * donating state is given the time). A node that leaves the cluster as inconsistent (it failed to apply
 * what the others applied: Galera's inconsistency voting) stays up refusing every query ("WSREP has not
 * yet prepared node for application use") until restarted, and a start that only waited for it failed
 * every later cluster test file on a hook timeout. Its grastate.dat is removed, so it joins again by a
 * full state transfer (SST), not from its own suspect data. Each kill is written to stderr and to
 * $CLUSTER_DIR/recoveries.log with the last errors of the node's log (`report` prints both).
 */
async function strays(graceMs) {
  const until = Date.now() + graceMs;
  for (;;) {
    const states = await Promise.all(NODES.map(async (n) => ({ n, pid: pidOf(n), s: await nodeStatus(n) })));
    const found = states.filter(({ pid, s }) => pid !== undefined && !synced(s));
    if (found.length === 0) return;
    if (Date.now() > until) {
      for (const { n, s } of found) {
        const line =
          `${new Date().toISOString()} node ${n} ran but was not Synced in a primary component after ` +
          `${graceMs / 1000} s (${describe(s)}): killed, to join again by a full state transfer. ` +
          `The last errors of its log:\n${logLines(n, ERRORS, 20).join("\n")}\n`;
        process.stderr.write(`cluster: ${line}`);
        await writeFile(join(clusterDir(), "recoveries.log"), line, { flag: "a" });
        await kill(n);
        await rm(join(nodeDir(n), "data", "grastate.dat"), { force: true });
      }
      return;
    }
    await sleep(500);
  }
}

/** Stops every node (3, 2, 1: node 1 is last and so safe to bootstrap from); `clean` removes the folder. */
export async function stop({ clean = false } = {}) {
  for (const n of [...NODES].reverse()) {
    const pid = pidOf(n);
    if (pid === undefined) continue;
    process.kill(pid, "SIGTERM");
    for (let i = 0; pidOf(n) !== undefined; i++) {
      if (i === 600) process.kill(pid, "SIGKILL");
      await sleep(100);
    }
  }
  if (clean) await rm(clusterDir(), { recursive: true, force: true });
}

/** kill -9 of node n; resolves once it is gone. */
export async function kill(n) {
  const pid = pidOf(n);
  if (pid === undefined) throw new Error(`node ${n} is not running`);
  process.kill(pid, "SIGKILL");
  while (pidOf(n) !== undefined) await sleep(20);
}

/** Starts node n again (after kill or a crash) and resolves once it is Synced with the others. */
export async function restart(n) {
  const others = NODES.filter((m) => m !== n && pidOf(m) !== undefined);
  if (pidOf(n) === undefined) {
    // A node back before the others have dropped its dead self (Galera's suspect timeout, 5 s) takes
    // about 20 s to be let in; once they have, it joins in about 2 s.
    for (const m of others) await waitView(m, others.length);
    await launch(n, others.length === 0);
  }
  await waitSynced(n, others.length + 1);
}

/** Waits until node m's primary component has `size` members (after a node died: once it is dropped). */
async function waitView(m, size, deadline = Date.now() + 60_000) {
  for (;;) {
    const s = await nodeStatus(m);
    if (s?.wsrep_cluster_status === "Primary" && Number(s.wsrep_cluster_size) === size) return;
    if (Date.now() > deadline) throw new Error(`node ${m} did not reach a cluster of ${size} in time (${describe(s)})`);
    await sleep(200);
  }
}

/** One entry per node: its pid (undefined when not running) and wsrep status (undefined when it does not answer). */
export async function status() {
  return Promise.all(
    NODES.map(async (n) => ({ node: n, ports: nodePorts(n), pid: pidOf(n), wsrep: await nodeStatus(n) })),
  );
}

async function printStatus() {
  for (const { node, ports, pid, wsrep } of await status())
    console.log(`node ${node}: ${pid === undefined ? "stopped" : `pid ${pid}`}, SQL ${ports.sql}: ${describe(wsrep)}`);
}

/**
 * What CI prints when the tests failed (.ci/run): per node the last 60 errors and 20 events of its error.log
 * (the folder outlives runs: the older lines may be another run's), and the nodes `start` killed as strays.
 */
export function report() {
  const parts = [];
  for (const n of NODES) {
    const log = join(nodeDir(n), "error.log");
    const errors = logLines(n, ERRORS, 60);
    const events = logLines(n, EVENTS, 20);
    parts.push(`node ${n}: the last ${errors.length} errors of ${log}`, ...errors.map((line) => `  ${line}`));
    parts.push(`node ${n}: the last ${events.length} views, shutdowns and crashes`, ...events.map((l) => `  ${l}`));
  }
  const recoveries = join(clusterDir(), "recoveries.log");
  if (existsSync(recoveries)) parts.push(`nodes killed as strays (${recoveries}):`, readFileSync(recoveries, "utf8"));
  return parts.join("\n");
}

function nodeArg(value) {
  const n = Number(value);
  if (!NODES.includes(n)) throw new Error(`a node number (${NODES.join(", ")}) is needed, not ${value}`);
  return n;
}

async function main(argv) {
  const [command, arg] = argv;
  const clean = argv.includes("--clean");
  const began = Date.now();
  const took = () => `${((Date.now() - began) / 1000).toFixed(1)} s`;
  switch (command) {
    case "start": {
      await start({ clean });
      const ports = NODES.map((n) => nodePorts(n).sql).join(", ");
      console.log(`cluster: 3 nodes Synced in ${took()} (${clusterDir()}; SQL on 127.0.0.1:${ports}, root)`);
      break;
    }
    case "stop":
      await stop({ clean });
      console.log(`cluster: stopped in ${took()}${clean ? `, ${clusterDir()} removed` : ""}`);
      break;
    case "kill":
      await kill(nodeArg(arg));
      console.log(`cluster: node ${arg} killed (SIGKILL)`);
      break;
    case "restart":
      await restart(nodeArg(arg));
      console.log(`cluster: node ${arg} Synced again in ${took()}`);
      break;
    case "status":
      await printStatus();
      break;
    case "report":
      await printStatus();
      console.log(report());
      break;
    default:
      console.error(
        "usage: npm run cluster -- start [--clean] | stop [--clean] | status | report | kill <n> | restart <n>",
      );
      process.exitCode = 2;
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((error) => {
    console.error(`cluster: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
  });
}
