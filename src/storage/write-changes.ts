/**
 * What one write transaction (write-transaction.ts) changed: each version's change record, in order, the
 * answers that show its revision, and (MySQL) the full-text text kept for after COMMIT.
 */
import type { ChangeKind, RevisionChange, WriteContext, WriteStatements } from "./queries/writes.js";
import { revisionStatements, writeContent } from "./queries/writes.js";
import type { StoredDefinition } from "./repository.js";
import { toDatabaseTimestamp } from "./rows.js";
import type { CommitWith } from "./run/writes.js";
import type { KeptText } from "./search-text.js";

export type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** A version this transaction changed: what its change record says, and the answers that show its revision. */
export interface PendingChange {
  readonly id: string;
  readonly agentNumber: number;
  kind: ChangeKind;
  readonly at: string;
  /** Its new content, not written yet: the UPDATE goes with COMMIT (update()). */
  content?: RevisionChange["content"];
  /** What the transaction answered about the version; their modRevision is set when it commits. */
  readonly answers: Mutable<StoredDefinition>[];
}

/**
 * Which kind a version changed twice in one write shows: being added, then a status change, then the rest (a
 * liveness change is a write of its own: issue 44).
 */
const KIND_RANK: Readonly<Record<ChangeKind, number>> = {
  ADDED: 3,
  STATUS_CHANGED: 2,
  MODIFIED: 1,
  LIVENESS_CHANGED: 0,
};

/**
 * What the steps of a write kept in modules of their own (write-insert.ts, write-status.ts) use of their
 * transaction: its tenant, its changes, and its agents' locks.
 */
export interface WriteSteps {
  readonly tenant: string;
  readonly changes: WriteChanges;
  /** Locks the agent's row unless the transaction holds it already. */
  lockAgent(context: WriteContext, agentNumber: number): Promise<void>;
}

/** The versions one transaction changed, and what it keeps of them for COMMIT and after. */
export class WriteChanges {
  /** The versions changed so far, in order: each takes a revision, in this order, as the transaction commits. */
  readonly #changes = new Map<string, PendingChange>();
  /** MySQL: the full-text text of each version whose content this transaction wrote, kept after COMMIT. */
  readonly #texts = new Map<string, string>();
  /** After COMMIT (settle): the revision each changed version took. */
  readonly #revisions = new Map<string, number>();

  /**
   * Records that this transaction changed version `id` (once per version: a second change keeps the kind that
   * says most), and answers its record.
   */
  changed(id: string, agentNumber: number, kind: ChangeKind, at = toDatabaseTimestamp(new Date())): PendingChange {
    const known = this.#changes.get(id);
    if (known !== undefined) {
      if (KIND_RANK[kind] > KIND_RANK[known.kind]) known.kind = kind;
      return known;
    }
    const change: PendingChange = { id, agentNumber, kind, at, answers: [] };
    this.#changes.set(id, change);
    return change;
  }

  /** The record of version `id`, if this transaction changed it. */
  get(id: string): PendingChange | undefined {
    return this.#changes.get(id);
  }

  keepText(id: string, text: string | undefined): void {
    if (text !== undefined) this.#texts.set(id, text);
  }

  /** Writes the content UPDATEs left for COMMIT now (the transaction goes on: what follows reads them). */
  async writeLeftContent(context: WriteContext, tenant: string): Promise<void> {
    for (const change of this.#changes.values()) {
      if (change.content === undefined) continue;
      await writeContent(context, tenant, change.id, change.content);
      change.content = undefined;
    }
  }

  /**
   * The statements to send with COMMIT: the tenant's revisions for the versions changed, their mod_revision,
   * their change records; undefined when nothing changed (no revision is taken).
   */
  lastStatements(statements: WriteStatements, tenant: string): CommitWith | undefined {
    if (this.#changes.size === 0) return undefined;
    const changes = [...this.#changes.values()].map(
      ({ id, agentNumber, kind, at, content }): RevisionChange =>
        content === undefined ? { id, agentNumber, kind, at } : { id, agentNumber, kind, at, content },
    );
    return revisionStatements(statements, tenant, changes);
  }

  /** After COMMIT: `last` was the last revision taken; each change's answers show the one it took. */
  settle(last: number): void {
    const changes = [...this.#changes.values()];
    changes.forEach((change, i) => {
      const revision = last - (changes.length - 1 - i);
      this.#revisions.set(change.id, revision);
      for (const answer of change.answers) answer.modRevision = revision;
    });
  }

  /** After COMMIT (settle): the texts kept, each with the revision its version took. */
  textsToKeep(tenant: string): KeptText[] {
    const texts: KeptText[] = [];
    for (const [id, text] of this.#texts) {
      const revision = this.#revisions.get(id);
      if (revision !== undefined) texts.push({ tenant, id, text, revision });
    }
    return texts;
  }
}
