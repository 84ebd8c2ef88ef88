/**
 * One function per query. Each takes the connection or transaction to run on
 * explicitly (`{ tx }` on knex for the cold paths, a WriteContext inside a
 * write, a ReadContext for the hot reads), so a caller can see what runs
 * inside a transaction.
 *
 * Locking reads (`...ForUpdate`) add FOR UPDATE on MySQL, where write
 * transactions run at READ COMMITTED (see sql-repository.ts): InnoDB locks the
 * rows found until the transaction ends, and takes no gap locks for rows not
 * found; a racing insert of those fails on a unique index instead. On a
 * Galera cluster a locking read holds on its own node only: every decision
 * read under one is followed by a write of the row it locked (or, for an
 * absent row, an insert that a unique key guards), which certification
 * checks across nodes; the agent's lock is a write for that reason
 * (lockAgent; the list with the test of each: docs/galera.md). SQLite
 * needs no locks: its transactions on our single connection run one at a
 * time, and a transaction of another process that wrote in between makes our
 * first write fail with SQLITE_BUSY, which the repository retries; so SQLite's
 * statements have no FOR UPDATE.
 */

import type { UpsertKey } from "../repository.js";
import type {
  AgentExternalIdRow,
  AgentRow,
  DefinitionReadRow,
  InstanceRow,
  NewAgentDefinitionRow,
  TenantRow,
} from "../rows.js";
import { fromDatabaseInteger } from "../rows.js";
import type { Dialect } from "../run/connection.js";
import type { BoundStatement, CommitWith, WriteBinding, WriteSession } from "../run/writes.js";
import { readColumns } from "./reads.js";
import { agents, definitionChanges, definitions, externalIds, tenantRevisions, tenants } from "./tables.js";

// ---- inside a write ----
//
// The statements of the write transaction (sql-repository.ts's write). Like the hot reads, their
// SQL is written out here per dialect and built once (writeStatements), and each runs through the
// driver on the transaction's one connection (run/writes.ts), with bindings only.

/** A row as a write inserts it: its integer columns as numbers, its creation time as toDatabaseTimestamp's text. */
export type NewRow<Row, Integers extends keyof Row> = Omit<Row, Integers | "created_at"> & {
  readonly [K in Integers]: number;
} & { readonly created_at: string };

/** Where a statement of a write transaction runs: its session, and the statements built for its dialect. */
export interface WriteContext {
  readonly session: WriteSession;
  readonly statements: WriteStatements;
}

/** The SQL of the write transaction, for one dialect. */
export interface WriteStatements {
  readonly dialect: Dialect;
  /** Bindings: name. */
  readonly tenant: string;
  /** Bindings: tenant, name, provider id, version. Locks the definition on MySQL, not its agent. */
  readonly instanceByKey: string;
  /** Bindings: tenant, id. */
  readonly instanceById: string;
  /** Bindings: tenant, id. Locks the definition on MySQL, not its agent. */
  readonly instanceByIdForUpdate: string;
  /** Bindings: tenant, agent number. Every version of the agent, newest first; locks them on MySQL. */
  readonly instancesOfAgentForUpdate: string;
  /**
   * MySQL only. Bindings: tenant, number. Locks the agent's row by writing it (raises lock_count): what
   * serializes changes to its versions' status and latest flag, on every node of a Galera cluster.
   */
  readonly lockAgent: string;
  /** Bindings: tenant, agent number. Clears the latest flag of the agent's versions (before a new version takes it). */
  readonly clearLatest: string;
  /** Bindings: tenant, agent number. The id of the agent's newest version that is not DEACTIVATED. */
  readonly newestLiveOfAgent: string;
  /**
   * Bindings: id, tenant, agent number, id. Sets the latest flag on that version (none for ""), clears it on
   * the others.
   */
  readonly setLatest: string;
  /** Bindings: status, status message, status changed at, updated at, tenant, id. Raises the revision. */
  readonly updateStatus: string;
  /** Bindings: tenant, id. The stored definition, read inside the write (as the hot reads read it). */
  readonly storedById: string;
  /** Bindings: tenant, reference id. */
  readonly newestInstanceByReference: string;
  /** Bindings: tenant, provider id, name. Locks on MySQL. */
  readonly agentByName: string;
  /** MySQL only. Bindings: provider id, name, tenant. */
  readonly lockSequenceAndFindAgent: string;
  /** Bindings: tenant. MySQL: sets LAST_INSERT_ID to the raised number; SQLite: answers it. */
  readonly takeAgentNumber: string;
  /** Bindings: tenant, number, reference id, provider id, name, created at. */
  readonly insertAgent: string;
  /** Bindings: tenant, provider id, externalAgentID. Locks on MySQL. */
  readonly externalIdOwner: string;
  /** Bindings: tenant, provider id, externalAgentID, agent number, created at. */
  readonly insertExternalId: string;
  /**
   * Bindings: id, tenant, name, provider id, version, agent number, document, binary, created at, updated at,
   * status changed at, latest. Answers the new row's seq (MySQL: its insertId; SQLite: RETURNING).
   */
  readonly insertDefinition: string;
  /** Bindings: document, binary, updated at, tenant, id. Raises the revision. */
  readonly updateDocument: string;
  /**
   * MySQL only. Bindings: agent number, document, binary, seq. Gives a row staged without its agent
   * (prepareInsert) its agent and its document.
   */
  readonly numberDefinition: string;
  /** Bindings: tenant, agent number. The ids of the agent's versions that carry the latest flag. */
  readonly latestOfAgent: string;
  /**
   * MySQL: bindings tenant, changes (JSON: [[id, kind, agent number, changed at], ...]), and the id, document,
   * binary and updated at of one version whose new content it writes (or four NULLs). Calls migration 0015's
   * procedure, which takes one revision of the tenant's counter per change, locking its row, sets each
   * version's mod_revision, appends the change records, COMMITs, and answers the last revision as a row: the
   * counter stays locked for no round trip. SQLite: bindings tenant, count. Takes `count` revisions and answers
   * the last as a row; the two statements below then write the rest, and COMMIT follows.
   */
  readonly takeRevisions: string;
  /** SQLite. Bindings: revision, tenant, id. Sets the version's mod_revision. */
  readonly setModRevision: string;
  /** SQLite. Bindings: tenant, revision, kind, definition id, agent number, changed at; per row. */
  readonly insertChanges: (rows: number) => string;
}

/** Builds the write transaction's SQL for `dialect`; the repository does it once. */
export function writeStatements(dialect: Dialect): WriteStatements {
  const mysql = dialect === "mysql";
  // SQLite needs no locks (see the top of this file).
  const locked = mysql ? " FOR UPDATE" : "";
  // MySQL assigns seq by AUTO_INCREMENT; SQLite only auto-increments a primary key,
  // and its single writer makes MAX + 1 race-free (the unique index guards it anyway).
  const seq = mysql
    ? { column: "", value: "" }
    : { column: "seq, ", value: `(SELECT COALESCE(MAX(seq), 0) + 1 FROM ${definitions}), ` };
  const instanceColumns =
    "d.id, d.tenant, d.agent_number, d.name, d.provider_id, d.version, d.created_at, d.updated_at, d.revision, " +
    "d.mod_revision, d.status, d.status_message, d.status_changed_at, d.is_latest, d.document_binary";
  const instances =
    `SELECT ${instanceColumns}, a.reference_id FROM ${definitions} d JOIN ${agents} a ON a.tenant ` +
    `= d.tenant AND a.number = d.agent_number`;
  // The agent's reference id by a subquery in locking reads, which then lock the definition rows only (see
  // instanceByKey).
  const lockedInstances =
    `SELECT ${instanceColumns}, (SELECT a.reference_id FROM ${agents} a WHERE a.tenant = ` +
    `d.tenant AND a.number = d.agent_number) AS reference_id FROM ${definitions} d`;
  return {
    dialect,
    tenant: `SELECT name, sequence_prefix, next_agent_number, created_at FROM ${tenants} WHERE name = ? LIMIT 1`,
    // The agent's reference id by a subquery, which a locking read does not lock (MySQL: "a locking
    // read clause in an outer statement does not lock the rows of a table in a nested subquery";
    // checked on MariaDB 10.11 with FOR UPDATE NOWAIT from a second session): see findByKeyForUpdate.
    instanceByKey:
      `${lockedInstances} WHERE d.tenant = ? AND d.name = ? AND d.provider_id = ? AND d.version = ? ` +
      `LIMIT 1${locked}`,
    instanceById: `${instances} WHERE d.tenant = ? AND d.id = ? LIMIT 1`,
    instanceByIdForUpdate: `${lockedInstances} WHERE d.tenant = ? AND d.id = ? LIMIT 1${locked}`,
    instancesOfAgentForUpdate:
      `${lockedInstances} WHERE d.tenant = ? AND d.agent_number = ? ORDER BY d.seq ` + `DESC${locked}`,
    // A write, not a locking read: Galera certifies written rows only, and a FOR UPDATE holds on its own node.
    lockAgent: `UPDATE ${agents} SET lock_count = lock_count + 1 WHERE tenant = ? AND number = ?`,
    clearLatest: `UPDATE ${definitions} SET is_latest = 0 WHERE tenant = ? AND agent_number = ? AND is_latest = 1`,
    newestLiveOfAgent:
      `SELECT id FROM ${definitions} WHERE tenant = ? AND agent_number = ? AND status <> ` +
      `'DEACTIVATED' ORDER BY seq DESC LIMIT 1`,
    setLatest:
      `UPDATE ${definitions} SET is_latest = CASE WHEN id = ? THEN 1 ELSE 0 END WHERE tenant = ? AND ` +
      `agent_number = ? AND is_latest <> CASE WHEN id = ? THEN 1 ELSE 0 END`,
    updateStatus:
      `UPDATE ${definitions} SET status = ?, status_message = ?, status_changed_at = ?, updated_at = ` +
      `?, revision = revision + 1 WHERE tenant = ? AND id = ?`,
    storedById:
      `SELECT ${readColumns(dialect)} FROM ${definitions} d LEFT JOIN ${agents} a ON a.tenant = d.tenant ` +
      `AND a.number = d.agent_number WHERE d.tenant = ? AND d.id = ?`,
    newestInstanceByReference: `${instances} WHERE a.tenant = ? AND a.reference_id = ? ORDER BY d.seq DESC LIMIT 1`,
    agentByName:
      `SELECT number, reference_id FROM ${agents} WHERE tenant = ? AND provider_id = ? AND name = ? ` +
      `LIMIT 1${locked}`,
    // The tenant's row, locked, and the agent if it exists by now (locked too): one round trip
    // where a lock and a second look took two, both while holding the sequence.
    lockSequenceAndFindAgent:
      `SELECT a.number, a.reference_id FROM ${tenants} t LEFT JOIN ${agents} a ON a.tenant ` +
      `= t.name AND a.provider_id = ? AND a.name = ? WHERE t.name = ?${locked}`,
    // One statement locks the row, raises the number and answers it: MySQL hands the value given to
    // LAST_INSERT_ID(expr) back as the statement's insert id, SQLite answers it with RETURNING.
    takeAgentNumber: mysql
      ? `UPDATE ${tenants} SET next_agent_number = LAST_INSERT_ID(next_agent_number + 1) WHERE name = ?`
      : `UPDATE ${tenants} SET next_agent_number = next_agent_number + 1 WHERE name = ? RETURNING next_agent_number`,
    insertAgent:
      `INSERT INTO ${agents} (tenant, number, reference_id, provider_id, name, created_at) VALUES (?, ` +
      `?, ?, ?, ?, ?)`,
    externalIdOwner:
      `SELECT agent_number FROM ${externalIds} WHERE tenant = ? AND provider_id = ? AND ` +
      `external_agent_id = ? LIMIT 1${locked}`,
    insertExternalId:
      `INSERT INTO ${externalIds} (tenant, provider_id, external_agent_id, agent_number, ` +
      `created_at) VALUES (?, ?, ?, ?, ?)`,
    insertDefinition:
      `INSERT INTO ${definitions} (${seq.column}id, tenant, name, provider_id, version, agent_number, document, ` +
      "document_binary, created_at, updated_at, revision, status, status_message, status_changed_at, is_latest) " +
      `VALUES (${seq.value}?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 'ACTIVE', NULL, ?, ?)${mysql ? "" : " RETURNING seq"}`,
    updateDocument:
      `UPDATE ${definitions} SET document = ?, document_binary = ?, updated_at = ?, revision = ` +
      `revision + 1 WHERE tenant = ? AND id = ?`,
    numberDefinition:
      `UPDATE ${definitions} SET agent_number = ?, document = ?, document_binary = ? WHERE seq = ? AND ` +
      "agent_number IS NULL",
    latestOfAgent: `SELECT id FROM ${definitions} WHERE tenant = ? AND agent_number = ? AND is_latest = 1`,
    // An upsert, so a tenant made by a version before migration 0015 (which has no row) starts its count here.
    takeRevisions: mysql
      ? "CALL asor_commit_revisions(?, ?, ?, ?, ?, ?, ?)"
      : `INSERT INTO ${tenantRevisions} (tenant, revision) VALUES (?, ?) ON CONFLICT (tenant) DO UPDATE SET ` +
        "revision = revision + excluded.revision RETURNING revision",
    setModRevision: `UPDATE ${definitions} SET mod_revision = ? WHERE tenant = ? AND id = ?`,
    insertChanges: (rows) =>
      `INSERT INTO ${definitionChanges} (tenant, revision, kind, definition_id, agent_number, changed_at) VALUES ` +
      Array.from({ length: rows }, () => "(?, ?, ?, ?, ?, ?)").join(", "),
  };
}

/** The tenant row, read as the transaction begins, or undefined. */
export async function findTenantIn(
  { session, statements }: WriteContext,
  name: string,
): Promise<TenantRow | undefined> {
  const [row] = await session.rows<TenantRow>(statements.tenant, [name]);
  return row;
}

/**
 * Takes the tenant's next agent number, locking the tenant's row (on MySQL;
 * so concurrent creators queue here and see each other's increments) and
 * raising it, in one statement. The increment rolls back with the
 * transaction, so numbers have no gaps.
 */
export async function takeAgentNumber({ session, statements }: WriteContext, tenant: string): Promise<number> {
  if (statements.dialect === "mysql") {
    const { affectedRows, insertId } = await session.change(statements.takeAgentNumber, [tenant]);
    if (affectedRows !== 1)
      throw new Error(`Expected to raise the agent sequence of tenant "${tenant}" once, raised ${affectedRows}.`);
    return insertId - 1;
  }
  const [row] = await session.rows<Pick<TenantRow, "next_agent_number">>(statements.takeAgentNumber, [tenant]);
  if (row === undefined) throw new Error(`Tenant "${tenant}" vanished inside its own write transaction.`);
  return fromDatabaseInteger(row.next_agent_number) - 1;
}

// ---- agents, inside a write ----

/** The agent whose first version had this provider and name, locked on MySQL. */
export async function findAgentByNameForUpdate(
  { session, statements }: WriteContext,
  tenant: string,
  providerId: string,
  name: string,
): Promise<Pick<AgentRow, "number" | "reference_id"> | undefined> {
  const [row] = await session.rows<Pick<AgentRow, "number" | "reference_id">>(statements.agentByName, [
    tenant,
    providerId,
    name,
  ]);
  return row;
}

/**
 * MySQL: locks the tenant's agent sequence (its row) until the transaction
 * ends, as every creator of an agent does in takeAgentNumber, and answers the
 * agent with this provider and name if it exists now, locked. While the lock
 * is held no other transaction can create an agent in the tenant, so an
 * agent absent here stays absent until we create it.
 */
export async function lockSequenceAndFindAgent(
  { session, statements }: WriteContext,
  tenant: string,
  providerId: string,
  name: string,
): Promise<Pick<AgentRow, "number" | "reference_id"> | undefined> {
  const [row] = await session.rows<{ number: AgentRow["number"] | null; reference_id: string | null }>(
    statements.lockSequenceAndFindAgent,
    [providerId, name, tenant],
  );
  if (row === undefined) throw new Error(`Tenant "${tenant}" vanished inside its own write transaction.`);
  return row.number === null || row.reference_id === null
    ? undefined
    : { number: row.number, reference_id: row.reference_id };
}

/** Inserts an agent; a second agent with the same provider and name fails with a duplicate key. */
export async function insertAgent(
  { session, statements }: WriteContext,
  row: NewRow<AgentRow, "number">,
): Promise<void> {
  await session.change(statements.insertAgent, [
    row.tenant,
    row.number,
    row.reference_id,
    row.provider_id,
    row.name,
    row.created_at,
  ]);
}

// ---- external ids, inside a write ----

/** The number of the agent holding this externalAgentID for this provider, locked on MySQL. */
export async function findExternalIdOwnerForUpdate(
  { session, statements }: WriteContext,
  tenant: string,
  providerId: string,
  externalAgentId: string,
): Promise<Pick<AgentExternalIdRow, "agent_number"> | undefined> {
  const [row] = await session.rows<Pick<AgentExternalIdRow, "agent_number">>(statements.externalIdOwner, [
    tenant,
    providerId,
    externalAgentId,
  ]);
  return row;
}

/** Records a claim; a claim of the same externalAgentID fails with a duplicate key. */
export async function insertExternalId(
  { session, statements }: WriteContext,
  row: NewRow<AgentExternalIdRow, "agent_number">,
): Promise<void> {
  await session.change(statements.insertExternalId, [
    row.tenant,
    row.provider_id,
    row.external_agent_id,
    row.agent_number,
    row.created_at,
  ]);
}

// ---- definitions, inside a write ----

/**
 * The instance holding `key`, locked on MySQL, in one round trip. Only the
 * definition row is locked, not its agent (a locking join would lock both,
 * and a creator of a version locks the agent first and then the key's index
 * entry: a deadlock); the agent's reference id comes from a subquery, which
 * reads without locking. Agents never change once written, so reading the
 * reference id unlocked is exact. When no row holds the key nothing is locked
 * under READ COMMITTED: a racing insert of the same key fails on the unique
 * index and its work runs again.
 */
export async function findByKeyForUpdate(
  { session, statements }: WriteContext,
  tenant: string,
  key: UpsertKey,
): Promise<InstanceRow | undefined> {
  const [row] = await session.rows<Omit<InstanceRow, "reference_id"> & { reference_id: string | null }>(
    statements.instanceByKey,
    [tenant, key.name, key.providerId, key.version],
  );
  if (row === undefined) return undefined;
  if (row.reference_id === null)
    throw new Error(`Agent ${String(row.agent_number)} of definition ${row.id} is missing.`);
  return { ...row, reference_id: row.reference_id };
}

/** The instance with this id in this tenant. */
export async function findInstanceById(
  { session, statements }: WriteContext,
  tenant: string,
  id: string,
): Promise<InstanceRow | undefined> {
  const [row] = await session.rows<InstanceRow>(statements.instanceById, [tenant, id]);
  return row;
}

/** The newest instance (highest seq) of the agent with this reference id. */
export async function findNewestInstanceByReference(
  { session, statements }: WriteContext,
  tenant: string,
  referenceId: string,
): Promise<InstanceRow | undefined> {
  const [row] = await session.rows<InstanceRow>(statements.newestInstanceByReference, [tenant, referenceId]);
  return row;
}

/** The instance with this id, locked on MySQL (the definition row only, as findByKeyForUpdate). */
export async function findInstanceByIdForUpdate(
  { session, statements }: WriteContext,
  tenant: string,
  id: string,
): Promise<InstanceRow | undefined> {
  const [row] = await session.rows<InstanceRow>(statements.instanceByIdForUpdate, [tenant, id]);
  return row === undefined ? undefined : withReference(row);
}

/** Every version of an agent, newest first, locked on MySQL. */
export async function findInstancesOfAgentForUpdate(
  { session, statements }: WriteContext,
  tenant: string,
  agentNumber: number,
): Promise<InstanceRow[]> {
  return (await session.rows<InstanceRow>(statements.instancesOfAgentForUpdate, [tenant, agentNumber])).map(
    withReference,
  );
}

function withReference(row: InstanceRow): InstanceRow {
  if (row.reference_id === null)
    throw new Error(`Agent ${String(row.agent_number)} of definition ${row.id} is missing.`);
  return row;
}

/**
 * MySQL: locks the agent's row until the transaction ends. Every write that
 * changes which of an agent's versions is latest, or decides on their
 * statuses (a new version, a status change), takes it first, so two of them
 * never decide from snapshots that miss each other. It writes the row
 * (migration 0012's lock_count) rather than reading it FOR UPDATE: on a
 * Galera cluster a locking read holds on its own node only, and only rows a
 * transaction writes take part in certification, so two such writes through
 * different nodes now conflict and one is tried again (docs/galera.md).
 * SQLite's writers run one at a time anyway.
 */
export async function lockAgent(
  { session, statements }: WriteContext,
  tenant: string,
  agentNumber: number,
): Promise<void> {
  if (statements.dialect !== "mysql") return;
  // Rows matched (mysql2 connects with FOUND_ROWS): 1 whenever the agent exists.
  const { affectedRows } = await session.change(statements.lockAgent, [tenant, agentNumber]);
  if (affectedRows !== 1)
    throw new Error(`Agent ${agentNumber} of tenant "${tenant}" vanished inside a write transaction.`);
}

/** Clears the latest flag of every version of the agent: a new version is about to take it. */
export async function clearLatest(
  { session, statements }: WriteContext,
  tenant: string,
  agentNumber: number,
): Promise<void> {
  await session.change(statements.clearLatest, [tenant, agentNumber]);
}

/** The id of the agent's newest version that is not DEACTIVATED; undefined when every version is. */
export async function newestLiveOfAgent(
  { session, statements }: WriteContext,
  tenant: string,
  agentNumber: number,
): Promise<string | undefined> {
  const [newest] = await session.rows<{ id: string }>(statements.newestLiveOfAgent, [tenant, agentNumber]);
  return newest?.id;
}

/**
 * Puts the latest flag on the agent's newest version that is not DEACTIVATED (none when all are) and answers
 * its id.
 */
export async function refreshLatest(
  context: WriteContext,
  tenant: string,
  agentNumber: number,
): Promise<string | undefined> {
  const newest = await newestLiveOfAgent(context, tenant, agentNumber);
  const id = newest ?? "";
  await context.session.change(context.statements.setLatest, [id, tenant, agentNumber, id]);
  return newest;
}

/** Sets a version's status, raising its revision and updated_at. */
export async function updateStatus(
  { session, statements }: WriteContext,
  tenant: string,
  id: string,
  change: { readonly status: string; readonly status_message: string | null; readonly at: string },
): Promise<void> {
  const { affectedRows } = await session.change(statements.updateStatus, [
    change.status,
    change.status_message,
    change.at,
    change.at,
    tenant,
    id,
  ]);
  if (affectedRows !== 1)
    throw new Error(`Expected to set the status of one agent definition row, set ${affectedRows}.`);
}

/** A stored definition as the hot reads answer it, read inside the write (for a status change's answer). */
export async function readStoredInWrite(
  { session, statements }: WriteContext,
  tenant: string,
  id: string,
): Promise<DefinitionReadRow | undefined> {
  const [row] = await session.rows<DefinitionReadRow>(statements.storedById, [tenant, id]);
  return row;
}

/** Inserts a new row and answers its seq: MySQL's insert id, SQLite's `RETURNING seq` (MySQL has no RETURNING). */
export async function insertDefinition(
  { session, statements }: WriteContext,
  row: NewAgentDefinitionRow,
): Promise<number> {
  const bindings: WriteBinding[] = [
    row.id,
    row.tenant,
    row.name,
    row.provider_id,
    row.version,
    row.agent_number,
    row.document,
    row.document_binary,
    row.created_at,
    row.updated_at,
    row.status_changed_at,
    row.is_latest ? 1 : 0,
  ];
  if (statements.dialect === "mysql") return (await session.change(statements.insertDefinition, bindings)).insertId;
  const [inserted] = await session.rows<{ seq: number | bigint }>(statements.insertDefinition, bindings);
  if (inserted === undefined) throw new Error("The insert of an agent definition returned no seq.");
  return Number(inserted.seq);
}

/**
 * Gives the row `seq`, inserted by this transaction with no agent (MySQL), its agent and both encodings of
 * its definition, which carry the agent's reference id.
 */
export async function numberDefinition(
  { session, statements }: WriteContext,
  seq: number,
  agentNumber: number,
  content: Pick<NewAgentDefinitionRow, "document" | "document_binary">,
): Promise<void> {
  const { affectedRows } = await session.change(statements.numberDefinition, [
    agentNumber,
    content.document,
    content.document_binary,
    seq,
  ]);
  if (affectedRows !== 1)
    throw new Error(`Expected to number one staged agent definition row, numbered ${affectedRows}.`);
}

/** Replaces both encodings of an existing row, together; its id, key, agent and creation time stay. */
export async function updateDocument(
  { session, statements }: WriteContext,
  tenant: string,
  id: string,
  content: Pick<NewAgentDefinitionRow, "document" | "document_binary" | "updated_at">,
): Promise<void> {
  const { affectedRows } = await session.change(statements.updateDocument, [
    content.document,
    content.document_binary,
    content.updated_at,
    tenant,
    id,
  ]);
  if (affectedRows !== 1) throw new Error(`Expected to update one agent definition row, updated ${affectedRows}.`);
}

/** The ids of the agent's versions that carry the latest flag now (at most one, but for a race the flag lost). */
export async function latestOfAgent(
  { session, statements }: WriteContext,
  tenant: string,
  agentNumber: number,
): Promise<string[]> {
  return (await session.rows<{ id: string }>(statements.latestOfAgent, [tenant, agentNumber])).map((row) => row.id);
}

// ---- revisions, inside a write ----

/** What a change record says a write did to a version (migration 0015's definition_changes.kind). */
export type ChangeKind = "ADDED" | "MODIFIED" | "STATUS_CHANGED";

/** One version a write changed, in the order the write changed them: it takes its revision from that order. */
export interface RevisionChange {
  readonly id: string;
  readonly agentNumber: number;
  readonly kind: ChangeKind;
  /** When, as toDatabaseTimestamp's text. */
  readonly at: string;
  /** Its new content, when the write's UPDATE of it is left to the statements sent with COMMIT. */
  readonly content?: RevisionContent;
}

/**
 * A version's content written with COMMIT: an existing version's new content, or (`numbered`) a new agent's
 * staged version (migration 0014) taking its agent number and its complete encodings.
 */
export type RevisionContent =
  | Pick<NewAgentDefinitionRow, "document" | "document_binary" | "updated_at">
  | {
      readonly numbered: { readonly seq: number; readonly agentNumber: number };
      readonly document: string;
      readonly document_binary: Buffer;
    };

/** Writes a content left for COMMIT now, as its own statement: the transaction goes on and reads it. */
export async function writeContent(
  context: WriteContext,
  tenant: string,
  id: string,
  content: RevisionContent,
): Promise<void> {
  if ("numbered" in content)
    await numberDefinition(context, content.numbered.seq, content.numbered.agentNumber, content);
  else await updateDocument(context, tenant, id, content);
}

/**
 * The statements that end a write: the content UPDATEs left for here, then one revision of the tenant per
 * change, each version's mod_revision, the change records, and COMMIT. The revision row stays locked from
 * taking it to the end of COMMIT, so on MySQL all of that is one CALL that commits (takeRevisions). The i-th of
 * n changes takes the (n - 1 - i)-th revision before the last.
 */
export function revisionStatements(
  statements: WriteStatements,
  tenant: string,
  changes: readonly RevisionChange[],
): CommitWith {
  const count = changes.length;
  const before = changes.flatMap(({ id, content }): BoundStatement[] => {
    if (content === undefined) return [];
    if ("numbered" in content)
      return [
        {
          sql: statements.numberDefinition,
          bindings: [content.numbered.agentNumber, content.document, content.document_binary, content.numbered.seq],
        },
      ];
    return [
      {
        sql: statements.updateDocument,
        bindings: [content.document, content.document_binary, content.updated_at, tenant, id],
      },
    ];
  });
  if (statements.dialect === "mysql") {
    const json = JSON.stringify(changes.map((change) => [change.id, change.kind, change.agentNumber, change.at]));
    // One version's new content goes into the CALL (the UPDATE that sets its mod_revision writes it): a round
    // trip and a row update fewer for a POST or PUT of an existing key.
    const [only, ...more] = changes.filter((change) => change.content !== undefined);
    const folded = only?.content !== undefined && more.length === 0 ? { id: only.id, ...only.content } : undefined;
    return {
      before: folded === undefined ? before : [],
      take: {
        sql: statements.takeRevisions,
        bindings: [
          tenant,
          json,
          folded?.id ?? null,
          folded?.document ?? null,
          folded?.document_binary ?? null,
          folded !== undefined && "updated_at" in folded ? folded.updated_at : null,
          folded !== undefined && "numbered" in folded ? folded.numbered.agentNumber : null,
        ],
      },
      after: () => [],
      commits: true,
    };
  }
  return {
    before,
    commits: false,
    take: { sql: statements.takeRevisions, bindings: [tenant, count] },
    after: (last) => {
      const revision = (i: number) => last - (count - 1 - i);
      return [
        ...changes.map(
          (change, i): BoundStatement => ({
            sql: statements.setModRevision,
            bindings: [revision(i), tenant, change.id],
          }),
        ),
        {
          sql: statements.insertChanges(count),
          bindings: changes.flatMap((change, i) => [
            tenant,
            revision(i),
            change.kind,
            change.id,
            change.agentNumber,
            change.at,
          ]),
        },
      ];
    },
  };
}
