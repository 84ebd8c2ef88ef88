/**
 * The agent's rows inside a write (write-transaction.ts): its number from the tenant's sequence, its row found
 * by name or created, the sequence and the agent locked, and the claims of externalAgentIDs. The locking rules:
 * writes.ts.
 */

import type { AgentExternalIdRow, AgentRow, TenantRow } from "../rows.js";
import { fromDatabaseInteger } from "../rows.js";
import type { NewRow, WriteContext } from "./write-statements.js";

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
