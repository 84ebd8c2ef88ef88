/**
 * The server settings the migrations need on a Galera cluster, checked
 * before they run, with an error that names each one (docs/operations.md,
 * "MariaDB Galera"; the decision is in docs/decisions.md).
 *
 * - `innodb_ft_enable_stopword = OFF`: 0009 builds its FULLTEXT index
 *   without stopwords by switching them off for its session, and InnoDB
 *   fixes that choice into the index when the index is made. The session
 *   setting does not travel with the DDL: the other nodes of a cluster
 *   build the same index with their own setting, and `q=the` then finds
 *   definitions through one node and none through the others. With the
 *   setting in every node's configuration, every node builds it alike.
 * - `log_bin_trust_function_creators = ON`: creating a trigger (0009,
 *   0010) needs it, or SUPER, on a Galera node even with binary logging
 *   off; without it the migration failed halfway.
 *
 * Checked only on a Galera node (`wsrep_on`) and only while a migration
 * that needs the setting is still to run: a single server keeps working
 * as it did (0009's session setting builds the same index there), and an
 * installation whose schema is up to date needs neither. Each process
 * sees the node it talks to; the docs require the settings on every node.
 */
import type { Knex } from "knex";

/** A setting a migration needs, the migrations that need it, and the value they need. */
interface Needed {
  readonly variable: string;
  readonly value: "OFF" | "ON";
  readonly migrations: readonly string[];
  readonly why: string;
}

const needed: readonly Needed[] = [
  {
    variable: "innodb_ft_enable_stopword",
    value: "OFF",
    migrations: ["0009-add-search-index"],
    why: "the keyword search's FULLTEXT index is built without stopwords, and every node builds its own",
  },
  {
    variable: "log_bin_trust_function_creators",
    value: "ON",
    migrations: ["0009-add-search-index", "0010-add-term-counts"],
    why: "the migrations create triggers, which a Galera node refuses without it (or SUPER)",
  },
];

async function globals(db: Knex, names: readonly string[]): Promise<Map<string, string>> {
  const [rows] = (await db.raw(
    `SHOW GLOBAL VARIABLES WHERE Variable_name IN (${names.map(() => "?").join(", ")})`,
    names,
  )) as [Array<{ Variable_name: string; Value: string }>, unknown];
  return new Map(rows.map((row) => [row.Variable_name.toLowerCase(), String(row.Value).toUpperCase()]));
}

/** The names of the migrations knex has recorded as run (none before knex's table exists). */
async function applied(db: Knex): Promise<Set<string>> {
  if (!(await db.schema.hasTable("knex_migrations"))) return new Set();
  const rows = (await db("knex_migrations").select("name")) as Array<{ name: string }>;
  return new Set(rows.map((row) => row.name));
}

/**
 * The message naming each setting a migration still to run needs and the
 * server lacks, given the server's global variables (names in lower case,
 * values upper case) and the migrations run; undefined when none is missing
 * or the server is not a Galera node.
 */
export function missingSettings(values: ReadonlyMap<string, string>, done: ReadonlySet<string>): string | undefined {
  if (values.get("wsrep_on") !== "ON") return undefined;
  const missing = needed.filter(
    (n) => n.migrations.some((m) => !done.has(m)) && values.has(n.variable) && values.get(n.variable) !== n.value,
  );
  if (missing.length === 0) return undefined;
  return (
    "This database is a Galera cluster node, and the migrations still to run need server settings it does not " +
    `have: ${missing.map((n) => `${n.variable} = ${n.value} (it is ${values.get(n.variable)}: ${n.why})`).join("; ")}. ` +
    "Set them in every node's configuration and restart the nodes (docs/operations.md, MariaDB Galera)."
  );
}

/**
 * Throws, naming each setting, when this is a Galera node and a migration
 * still to run needs a setting the node does not have.
 */
export async function checkServerSettings(db: Knex): Promise<void> {
  const values = await globals(db, ["wsrep_on", ...needed.map((n) => n.variable)]);
  if (values.get("wsrep_on") !== "ON") return;
  const message = missingSettings(values, await applied(db));
  if (message !== undefined) throw new Error(message);
}

/**
 * The message refusing a Galera node whose commits are not on disk when
 * acknowledged (`innodb_flush_log_at_trx_commit` other than 1), given its
 * global variables as `globals` reads them; undefined for 1, and for a server
 * that is not a Galera node.
 */
export function unsafeDurability(values: ReadonlyMap<string, string>): string | undefined {
  if (values.get("wsrep_on") !== "ON") return undefined;
  const flush = values.get("innodb_flush_log_at_trx_commit");
  if (flush === undefined || flush === "1") return undefined;
  return (
    `This database is a Galera cluster node with innodb_flush_log_at_trx_commit = ${flush}: it acknowledges a ` +
    "commit before the commit is on its disk, so a crash of every node at once loses writes the registry has " +
    "answered as stored. Set innodb_flush_log_at_trx_commit = 1 in every node's configuration (SET GLOBAL takes " +
    "effect at once) and start again (docs/galera.md)."
  );
}

/** Throws unsafeDurability's message on a Galera node that does not flush its log at every commit. */
export async function checkDurability(db: Knex): Promise<void> {
  const message = unsafeDurability(await globals(db, ["wsrep_on", "innodb_flush_log_at_trx_commit"]));
  if (message !== undefined) throw new Error(message);
}
