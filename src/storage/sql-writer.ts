/**
 * The repository's writes (sql-repository.ts): each a transaction run again after what it lost, as
 * run/write-failures.ts's table says for each kind of failure, within the write's deadline.
 */

import type { Knex } from "knex";
import { tenantNotFound } from "../domain/errors.js";
import { WRITE_RETRY_CAUSES, type WriteRetryCause } from "../domain/records.js";
import type { Logger } from "../logger.js";
import type { WriteContext, WriteStatements } from "./queries/writes.js";
import { findTenantIn, writeStatements } from "./queries/writes.js";
import type { WriteRetries, WriteTenant, WriteTransaction } from "./repository.js";
import { reloadTriggers, TriggerReloads } from "./run/broken-triggers.js";
import type { Database } from "./run/connection.js";
import { isNodeFailure } from "./run/driver-errors.js";
import { createSqliteCheckpointer, type SqliteCheckpointer } from "./run/sqlite-checkpointer.js";
import {
  backoffMs,
  raceCauseOf,
  type WriteAttempt,
  type WriteFailureKind,
  writeFailureOf,
  writeFailures,
} from "./run/write-failures.js";
import type { RunTransaction } from "./run/writes.js";
import { transactionRunner } from "./run/writes.js";
import { SearchTextKeeper } from "./search-text.js";
import { SqlWriteTransaction } from "./write-transaction.js";

/**
 * The write's deadline: StorageOptions.timeoutMs (DATABASE_TIMEOUT_MS,
 * default 10 s) from its start. A write that loses to other writers without a
 * duplicate key (a deadlock, a lock wait timeout, a lost Galera certification
 * at COMMIT, SQLITE_BUSY) is tried again with jittered backoff until then: a
 * burst of writers on one tenant drains at the rate the database commits. On
 * a 3-node Galera cluster every commit on one node aborts the creators waiting
 * on the tenant's sequence row on the others, and 8 attempts (about 0.6 s of
 * backoff) left 28 to 47 of 300 new agents refused
 * (test/cluster/certification.test.ts). On SQLite the same budget covers
 * another process's burst of commits (a Node and a Deno process on one file).
 */
export const defaultWriteBudgetMs = 10_000;

/** How long a write still has, and on how many other hosts it may still be tried. */
interface WriteBudget {
  deadline: number;
  failovers: number;
}

/** An attempt's state, as the failure handling reads it. */
interface Attempt extends WriteAttempt {
  /** The reloads of broken triggers that ended before this attempt began (TriggerReloads). */
  reloadsBefore: number;
}

export class SqlWriter {
  /** Where writes go: the pool of DATABASE_URL, or of DATABASE_WRITE_URL (single-writer). */
  readonly #db: Knex;
  readonly #dialect: Database["dialect"];
  /** The write transaction: BEGIN, SQL built here once, COMMIT, through the driver (run/writes.ts). */
  readonly #transaction: RunTransaction;
  readonly #writes: WriteStatements;
  /** MySQL: the full-text texts written after COMMIT, and their repair (search-text.ts). */
  readonly texts: SearchTextKeeper | undefined;
  /** SQLite: the WAL's checkpoints on a thread, off the event loop (run/sqlite-checkpointer.ts). */
  readonly #checkpointer: SqliteCheckpointer | undefined;
  /** MySQL: the writes' recovery from a node's broken triggers, one reload at a time (run/broken-triggers.ts). */
  readonly #triggerReloads = new TriggerReloads();
  /** Where a write's recovery from a node's broken triggers is told (run/broken-triggers.ts). */
  readonly #logger: Pick<Logger, "warn" | "info"> | undefined;
  /**
   * The tenants a write of this process has found: their name and prefix never change and no RPC deletes a
   * tenant, so each write after the first skips the tenant's row (a statement of ~6 a write on MySQL). A
   * tenant deleted by hand in the database is still taken as there until the process restarts; its
   * definitions' foreign keys refuse what would be written for it.
   */
  readonly #tenantsSeen = new Map<string, WriteTenant>();
  /** How long a write may keep retrying lost races (defaultWriteBudgetMs). */
  readonly #budgetMs: number;
  /** The writer's hosts: what a write's node failure is tried on again. */
  readonly #hosts: number;
  /** Write transactions run again, by cause (writeRetries). */
  readonly #retries: Record<WriteRetryCause, number> = Object.fromEntries(
    WRITE_RETRY_CAUSES.map((cause) => [cause, 0]),
  ) as Record<WriteRetryCause, number>;

  constructor(writer: Database, budgetMs: number, logger: Pick<Logger, "warn" | "info"> | undefined) {
    this.#db = writer.db;
    this.#dialect = writer.dialect;
    this.#hosts = writer.hosts;
    this.#budgetMs = budgetMs;
    this.#logger = logger;
    // READ COMMITTED on MySQL (every connection's session level, connection.ts): a locking read
    // that finds nothing takes no gap lock. Under REPEATABLE READ the gap locks of writers
    // creating different new agents deadlock against the tenant row that numbers them, and 200
    // writers on 10 keys ran out of retries. Here what is absent is guarded by the unique
    // indexes: a racing insert of the same key, agent or externalAgentID fails with a duplicate
    // key and the work runs again. SQLite is serializable anyway.
    // SQLite's WAL checkpoints on a thread of their own, off the event loop; its thread starts at the first write.
    const sqlite = writer.sqlite;
    this.#checkpointer =
      sqlite !== undefined && sqlite.checkpointIntervalMs > 0
        ? createSqliteCheckpointer(sqlite.filename, sqlite.checkpointIntervalMs)
        : undefined;
    this.#transaction = transactionRunner(writer.db, writer.dialect, this.#checkpointer?.beforeWrite);
    this.#writes = writeStatements(writer.dialect);
    if (writer.dialect === "mysql") {
      this.texts = new SearchTextKeeper(writer.db, logger);
      // A text a process died before writing (between a COMMIT and its text) is found at the next start.
      void this.texts.repair();
    }
  }

  async write<T>(tenant: string, work: (tx: WriteTransaction) => Promise<T>): Promise<T> {
    const budget: WriteBudget = { deadline: performance.now() + this.#budgetMs, failovers: this.#hosts - 1 };
    for (let attempt = 1; ; attempt++) {
      const state: Attempt = { dialect: this.#dialect, committing: false, reloadsBefore: 0 };
      try {
        return await this.#attempt(tenant, work, state);
      } catch (error) {
        await this.#goOnAfter(writeFailureOf(error, state), error, attempt, state, budget);
      }
    }
  }

  writeRetries(): WriteRetries {
    return { ...this.#retries };
  }

  /** Ends what the writes keep beside the pool: MySQL's texts' writer, SQLite's checkpoint thread. */
  async close(): Promise<void> {
    await this.texts?.close();
    await this.#checkpointer?.close();
  }

  /** One run of the transaction, under the broken triggers' reloads (TriggerReloads). */
  #attempt<T>(tenant: string, work: (tx: WriteTransaction) => Promise<T>, state: Attempt): Promise<T> {
    return this.#triggerReloads.attempt((reloads) => {
      state.reloadsBefore = reloads;
      return this.#transaction(async (session) => {
        const { result, tx } = await this.#writeOnce({ session, statements: this.#writes }, tenant, work);
        // The revisions are taken last, right before COMMIT: the tenant's writers queue on them. The
        // outcome of a write lost from the moment its COMMIT is sent is unknown; before that, it was
        // rolled back.
        const last = tx.lastStatements();
        if (last === undefined) state.committing = true;
        else tx.settle(await session.commitWith(last, () => (state.committing = true)));
        // Committed: MySQL's full-text texts are written soon, several writes' at a time (search-text.ts).
        this.texts?.keep(tx.textsToKeep());
        return result;
      });
    });
  }

  /**
   * Returns once the write is to run again (after the wait its failure's row asks for); throws what the write
   * answers when it is not (writeFailures).
   */
  async #goOnAfter(
    kind: WriteFailureKind,
    error: unknown,
    attempt: number,
    state: Attempt,
    budget: WriteBudget,
  ): Promise<void> {
    const failure = writeFailures[kind];
    if (failure.retry === "no") throw failure.answer(error);
    if (failure.retry === "next host") {
      if (budget.failovers-- <= 0) throw failure.answer(error);
      return this.#failedOver(budget);
    }
    const wait = backoffMs(attempt);
    if ((failure.attempts !== undefined && attempt >= failure.attempts) || performance.now() + wait >= budget.deadline)
      throw failure.answer(error);
    if (kind !== "broken_triggers") this.#retries[raceCauseOf(error, state.committing)]++;
    else if (!(await this.#reloadTriggers(error, state.reloadsBefore, budget))) return;
    await sleep(wait);
  }

  /** The write goes to the writer's next host (the pool moved there), with a deadline of its own. */
  #failedOver(budget: WriteBudget): void {
    budget.deadline = performance.now() + this.#budgetMs;
    this.#retries.node_failed++;
  }

  /**
   * Reloads a node's broken triggers once for all the process's writers that met them, while none of its
   * writes is under way (TriggerReloads). False when the node failed under the reload and the write moved to
   * the next host (to run again at once); throws the write's answer when the reload failed otherwise.
   */
  async #reloadTriggers(error: unknown, reloadsBefore: number, budget: WriteBudget): Promise<boolean> {
    let reloaded: boolean;
    try {
      reloaded = await this.#triggerReloads.reload(reloadsBefore, () =>
        reloadTriggers(this.#db, this.#budgetMs / 2000),
      );
    } catch (reloadError) {
      if (budget.failovers-- > 0 && isNodeFailure(reloadError)) {
        this.#failedOver(budget);
        return false;
      }
      this.#logger?.warn("a table's triggers failed to load and could not be reloaded", {
        error: String(error),
        reload: String(reloadError),
      });
      throw writeFailures.broken_triggers.answer(error);
    }
    this.#logger?.warn(
      reloaded
        ? "a table's triggers failed to load on the database node; reloaded"
        : "a table's triggers failed to load on the database node; reloaded since the write began",
      { error: String(error) },
    );
    this.#retries.triggers_reloaded++;
    return true;
  }

  async #writeOnce<T>(
    context: WriteContext,
    tenant: string,
    work: (tx: WriteTransaction) => Promise<T>,
  ): Promise<{ result: T; tx: SqlWriteTransaction }> {
    const tx = new SqlWriteTransaction(
      context,
      this.#tenantsSeen.get(tenant) ?? (await this.#tenantIn(context, tenant)),
    );
    try {
      const result = await work(tx);
      // A race the work caught and went on from: the database rolled back (MySQL does on a
      // deadlock) or refused a write, so committing what is left would be half a write.
      tx.throwIfFailed();
      tx.throwIfIncomplete();
      return { result, tx };
    } catch (error) {
      tx.throwIfFailed();
      throw error;
    } finally {
      tx.end();
    }
  }

  /** The tenant's row, read in the write's transaction; remembered once found (WriteTenant: it never changes). */
  async #tenantIn(context: WriteContext, name: string): Promise<WriteTenant> {
    const row = await findTenantIn(context, name);
    if (row === undefined) throw tenantNotFound(name);
    const tenant: WriteTenant = { name, sequencePrefix: row.sequence_prefix };
    this.#tenantsSeen.set(name, tenant);
    return tenant;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
