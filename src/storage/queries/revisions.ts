/**
 * The revisions a write takes as it ends (issue 20): what it changed, in order, and the statements that take
 * the tenant's revisions, set each version's mod_revision, append the change records and COMMIT (on MySQL one
 * CALL that commits: migration 0015).
 */

import type { NewAgentDefinitionRow } from "../rows.js";
import type { BoundStatement, CommitWith } from "../run/writes.js";
import type { WriteStatements } from "./write-statements.js";

/** What a change record says a write did to a version (migration 0015's definition_changes.kind). */
export type ChangeKind = "ADDED" | "MODIFIED" | "STATUS_CHANGED" | "LIVENESS_CHANGED";

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
