/**
 * A liveness change's statements, for SqlWriteTransaction.setLiveness (write-transaction.ts; issue 44): the
 * version's liveness row read (and locked on MySQL), the new published columns written when they change, and a
 * LIVENESS_CHANGED change record, which takes a tenant revision and sets the version's mod_revision as it commits.
 * The definition's row and documents are not written.
 */

import type { DriftKind } from "../domain/card-drift.js";
import type { LivenessDecision, LivenessNow, LivenessStateName } from "../domain/liveness.js";
import { NEVER_PROBED } from "../domain/liveness.js";
import { type LivenessRow, type LivenessStatements, livenessStatements } from "./queries/liveness.js";
import type { WriteContext } from "./queries/writes.js";
import { readStoredInWrite } from "./queries/writes.js";
import type { InstanceRef, StoredDefinition } from "./repository.js";
import { toDatabaseTimestamp, toStoredDefinition } from "./rows.js";
import type { Dialect } from "./run/connection.js";
import type { Mutable, WriteSteps } from "./write-changes.js";

const statementsByDialect = new Map<Dialect, LivenessStatements>();

/** The liveness statements of the transaction's dialect, built once. */
function statementsOf(context: WriteContext): LivenessStatements {
  const { dialect } = context.statements;
  let statements = statementsByDialect.get(dialect);
  if (statements === undefined) statementsByDialect.set(dialect, (statements = livenessStatements(dialect)));
  return statements;
}

/** A liveness row as the domain reads it. */
export function toLivenessNow(row: LivenessRow | undefined): LivenessNow {
  if (row === undefined) return NEVER_PROBED;
  return {
    state: row.state as LivenessStateName,
    drift: row.drift as DriftKind | null,
    json: row.liveness,
    failures: Number(row.failures),
  };
}

/**
 * Sets `version`'s published liveness to what `decide` makes of it as stored now; answers the version as stored
 * after (its modRevision set at COMMIT), or undefined when `decide` changed nothing (nothing written).
 */
export async function setLivenessIn(
  context: WriteContext,
  steps: WriteSteps,
  version: InstanceRef,
  decide: LivenessDecision,
): Promise<StoredDefinition | undefined> {
  const { tenant } = steps;
  const statements = statementsOf(context);
  const [row] = await context.session.rows<LivenessRow>(statements.rowForUpdate, [tenant, version.id]);
  const now = toLivenessNow(row);
  const published = decide(now);
  if (published === undefined || (published.state === now.state && published.drift === now.drift)) return undefined;
  const at = toDatabaseTimestamp(new Date());
  await context.session.change(statements.publish, [
    tenant,
    version.id,
    published.state,
    published.drift,
    published.json,
    at,
  ]);
  const change = steps.changes.changed(version.id, version.agent.number, "LIVENESS_CHANGED", at);
  const read = await readStoredInWrite(context, tenant, version.id);
  const stored = read === undefined ? undefined : toStoredDefinition(tenant, read);
  if (stored === undefined) throw new Error(`Agent definition ${version.id} vanished inside its own liveness change.`);
  const answer: Mutable<StoredDefinition> = { ...stored };
  change.answers.push(answer);
  return answer;
}
