/**
 * A status change's statements, for SqlWriteTransaction.setStatus (write-transaction.ts): under the agent's lock,
 * each version's status, then the agent's latest flag; the versions as they are stored now.
 */
import type { WriteContext } from "./queries/writes.js";
import { latestOfAgent, readStoredInWrite, refreshLatest, updateStatus } from "./queries/writes.js";
import type { InstanceRef, StoredDefinition } from "./repository.js";
import { toStoredDefinition } from "./rows.js";
import type { Mutable, WriteSteps } from "./write-changes.js";

/** The columns a status change sets. */
export type StatusColumns = Parameters<typeof updateStatus>[3];

/** Sets `versions` (of agent `agentNumber`, in the steps' tenant) to `change`'s status; answers them as stored. */
export async function setStatusIn(
  context: WriteContext,
  steps: WriteSteps,
  versions: readonly InstanceRef[],
  agentNumber: number,
  change: StatusColumns,
): Promise<StoredDefinition[]> {
  const { tenant } = steps;
  // Agent, then versions: the order findVersionsForUpdate and insert lock in.
  await steps.lockAgent(context, agentNumber);
  const latestBefore = await latestOfAgent(context, tenant, agentNumber);
  for (const version of versions) {
    await updateStatus(context, tenant, version.id, change);
    steps.changes.changed(version.id, agentNumber, "STATUS_CHANGED", change.at);
  }
  const latestNow = await refreshLatest(context, tenant, agentNumber);
  // The versions whose latest flag moved changed too (their meta.latest).
  for (const id of latestBefore) if (id !== latestNow) steps.changes.changed(id, agentNumber, "MODIFIED", change.at);
  if (latestNow !== undefined && !latestBefore.includes(latestNow))
    steps.changes.changed(latestNow, agentNumber, "MODIFIED", change.at);
  const stored: StoredDefinition[] = [];
  for (const version of versions) {
    const row = await readStoredInWrite(context, tenant, version.id);
    const definition = row === undefined ? undefined : toStoredDefinition(tenant, row);
    if (definition === undefined)
      throw new Error(`Agent definition ${version.id} vanished inside its own status change.`);
    const answer: Mutable<StoredDefinition> = { ...definition };
    steps.changes.get(version.id)?.answers.push(answer);
    stored.push(answer);
  }
  return stored;
}
