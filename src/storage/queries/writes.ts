/**
 * One function per query. Each takes the connection or transaction to run on
 * explicitly (`{ tx }` on knex for the cold paths, a WriteContext inside a
 * write, a ReadContext for the hot reads), so a caller can see what runs
 * inside a transaction.
 *
 * Locking reads (`...ForUpdate`) add FOR UPDATE on MySQL, where write
 * transactions run at READ COMMITTED (see sql-writer.ts): InnoDB locks the
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
import type { DefinitionReadRow, InstanceRow, NewAgentDefinitionRow, TenantRow } from "../rows.js";
import type { WriteBinding } from "../run/writes.js";
import type { RevisionContent } from "./revisions.js";
import type { WriteContext } from "./write-statements.js";

// ---- inside a write ----
//
// The statements of the write transaction (sql-writer.ts). Like the hot reads, their SQL is written out per
// dialect and built once (write-statements.ts), and each runs through the driver on the transaction's one
// connection (run/writes.ts), with bindings only. The agent's rows: agents.ts; the revisions: revisions.ts.

export {
  findAgentByNameForUpdate,
  findExternalIdOwnerForUpdate,
  insertAgent,
  insertExternalId,
  lockAgent,
  lockSequenceAndFindAgent,
  takeAgentNumber,
} from "./agents.js";
export type { ChangeKind, RevisionChange, RevisionContent } from "./revisions.js";
export { revisionStatements } from "./revisions.js";
export type { NewRow, WriteContext, WriteStatements } from "./write-statements.js";
export { writeStatements } from "./write-statements.js";

/** The tenant row, read as the transaction begins, or undefined. */
export async function findTenantIn(
  { session, statements }: WriteContext,
  name: string,
): Promise<TenantRow | undefined> {
  const [row] = await session.rows<TenantRow>(statements.tenant, [name]);
  return row;
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
