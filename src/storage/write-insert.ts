/**
 * A new version's insert, for SqlWriteTransaction (write-transaction.ts): announced (prepareInsert), staged
 * before the tenant's sequence is held (MySQL, a new agent: stageRow), then completed (completeStaged) or
 * written whole (insertRow).
 */
import { Buffer } from "node:buffer";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { type DefinitionIndex, indexSteps, inTurns, sameIndex } from "../domain/search-terms.js";
import { INSTANCE_ID } from "../domain/upsert.js";
import { indexDefinition } from "./queries/search-index.js";
import type { RevisionContent, WriteContext } from "./queries/writes.js";
import { clearLatest, insertDefinition, latestOfAgent, refreshLatest, writeContent } from "./queries/writes.js";
import type { AgentRef, UpsertKey } from "./repository.js";
import type { encodeDefinition } from "./rows.js";
import { toDatabaseTimestamp } from "./rows.js";
import { SQLITE_SLICE_MS } from "./run/writes.js";
import type { WriteSteps } from "./write-changes.js";

/**
 * The new instance prepareInsert announced: its key, its definition (but for its reference id), its creation
 * time, its DefinitionIndex when the caller gave it, and once staged (MySQL, a new agent) its row's seq and the
 * index its side rows were written from.
 */
export interface Pending {
  readonly key: UpsertKey;
  readonly definition: AgentDefinition;
  readonly at: Date;
  readonly seq: number | undefined;
  readonly index: DefinitionIndex | undefined;
}

/** A pending instance stageRow has written (its seq set). */
export type Staged = Pending & { readonly seq: number };

/** What insert() writes: the version, its agent, its encodings and index, and when. */
export interface NewVersion {
  readonly key: UpsertKey;
  readonly agent: AgentRef;
  readonly definition: AgentDefinition;
  readonly index: DefinitionIndex;
  /** Whether this transaction created the agent (it has no other versions). */
  readonly created: boolean;
  readonly timestamp: string;
  readonly encoded: ReturnType<typeof encodeDefinition>;
}

/** What insert()'s statements decided: whether the version is its agent's latest, and its numbering left for COMMIT. */
export interface Inserted {
  readonly latest: boolean;
  /** The staged version's numbering, left for the CALL that ends the transaction (MySQL; see completeStaged). */
  readonly numbering: RevisionContent | undefined;
}

/**
 * `definition`'s DefinitionIndex when the caller gave none (the service gives the one its admission made),
 * made a text at a time, giving the event loop back every SQLITE_SLICE_MS (issue 50).
 */
export const indexOf = (definition: AgentDefinition): Promise<DefinitionIndex> =>
  inTurns(indexSteps(definition), SQLITE_SLICE_MS);

export function assertNewInstanceId(id: string): void {
  if (!INSTANCE_ID.test(id))
    throw new Error(`A new instance was given "${id}" as its id; expected 32 lowercase hex characters.`);
}

/** Inserts the pending instance's row with no agent, and its index (MySQL; see prepareInsert): staged. */
export async function stageRow(context: WriteContext, steps: WriteSteps, pending: Pending): Promise<Staged> {
  const timestamp = toDatabaseTimestamp(pending.at);
  const { key, definition } = pending;
  const index = pending.index ?? (await indexOf(definition));
  const seq = await insertDefinition(context, {
    id: definition.id,
    tenant: steps.tenant,
    name: key.name,
    provider_id: key.providerId,
    version: key.version,
    agent_number: null,
    document: "",
    document_binary: Buffer.alloc(0),
    created_at: timestamp,
    updated_at: timestamp,
    status_changed_at: timestamp,
    is_latest: true,
  });
  steps.changes.keepText(definition.id, await indexDefinition(context, steps.tenant, definition.id, index, seq));
  return { ...pending, seq, index };
}

/**
 * insert() of the version stageRow wrote without an agent (MySQL, a new agent): gives it its agent and document,
 * or leaves that numbering for the CALL that ends the transaction (see below).
 */
export async function completeStaged(
  context: WriteContext,
  steps: WriteSteps,
  row: NewVersion,
  pending: Staged,
): Promise<Inserted> {
  const { tenant } = steps;
  const { agent, definition, index, created } = row;
  const numbered = {
    numbered: { seq: pending.seq, agentNumber: agent.number },
    document: row.encoded.document,
    document_binary: row.encoded.binary,
  };
  // A new agent's only version, indexed as staged: nothing else is left to write, and its numbering goes
  // into the CALL that takes the revisions and commits, one round trip fewer while the tenant's sequence
  // row is held (migration 0015). Written now if the transaction goes on (#run).
  // Staged: #stage set the index its side rows were written from.
  if (created && sameIndex(index, pending.index!)) return { latest: true, numbering: numbered };
  await writeContent(context, tenant, definition.id, numbered);
  // The index was made from the staged definition; the agent's reference id is not indexed, so
  // this does not happen unless that changes.
  if (!sameIndex(index, pending.index!))
    steps.changes.keepText(definition.id, await indexDefinition(context, tenant, definition.id, index));
  // Staged for a new agent that another writer created in the meantime (found under the sequence's
  // lock): its versions may have seqs above ours, and the latest flag goes to the newest.
  if (created) return { latest: true, numbering: undefined };
  await steps.lockAgent(context, agent.number);
  const latestBefore = await latestOfAgent(context, tenant, agent.number);
  const latestNow = await refreshLatest(context, tenant, agent.number);
  // A version of the other writer's that lost the flag to ours changed too (its meta.latest).
  for (const id of latestBefore)
    if (id !== definition.id && id !== latestNow) steps.changes.changed(id, agent.number, "MODIFIED");
  return { latest: latestNow === definition.id, numbering: undefined };
}

/** insert() of a version not staged: its row and index, taking the latest flag from the agent's others. */
export async function insertRow(context: WriteContext, steps: WriteSteps, row: NewVersion): Promise<void> {
  const { tenant } = steps;
  const { key, agent, definition, timestamp } = row;
  // The new version is ACTIVE and the agent's newest, so it takes the latest flag from the
  // others; under the agent's lock, so that concurrent writers of the agent see each other.
  // A new agent has no others: its first version costs no statement more than before.
  if (!row.created) {
    await steps.lockAgent(context, agent.number);
    // Under the agent's lock the flag stays where it is until clearLatest moves it: the version that
    // loses it changes too (its meta.latest), and takes a revision of its own.
    for (const id of await latestOfAgent(context, tenant, agent.number))
      steps.changes.changed(id, agent.number, "MODIFIED");
    await clearLatest(context, tenant, agent.number);
  }
  const seq = await insertDefinition(context, {
    id: definition.id,
    tenant,
    name: key.name,
    provider_id: key.providerId,
    version: key.version,
    agent_number: agent.number,
    document: row.encoded.document,
    document_binary: row.encoded.binary,
    created_at: timestamp,
    updated_at: timestamp,
    status_changed_at: timestamp,
    is_latest: true,
  });
  steps.changes.keepText(definition.id, await indexDefinition(context, tenant, definition.id, row.index, seq));
}
