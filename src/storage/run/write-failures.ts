/**
 * What a write transaction's failed attempt means, and what the write does next: one row per kind of
 * failure, beside the classification of the driver's error it starts from (driver-errors.ts). The write
 * loop (sql-writer.ts) looks a failure up here and does what its row says: answer at once, go to the
 * writer's next host, or wait a backoff and run the transaction again, within the write's deadline.
 */

import { outcomeUnknown, RegistryError, unavailable, writeConflict } from "../../domain/errors.js";
import type { WriteRetryCause } from "../../domain/records.js";
import type { Dialect } from "./connection.js";
import { classifyDriverError, isBrokenTriggers, isDuplicateKey, isNodeFailure, raceKind } from "./driver-errors.js";

/** The kinds of a failed attempt, in the order writeFailureOf tells them apart. */
export type WriteFailureKind =
  /** The work's own answer (a RegistryError: not found, a precondition, a conflict it found). */
  | "answered"
  /** MySQL: a table's triggers failed to load on the node (run/broken-triggers.ts). */
  | "broken_triggers"
  /** The database was lost while COMMIT was on its way: the write may have been committed. */
  | "lost_at_commit"
  /** Its node failed before COMMIT: nothing was written, and the pool moved to the next host. */
  | "node_failed"
  /** The database cannot be reached, or did not hand out a connection in time. */
  | "unavailable"
  /** A lost race on a unique key: another writer committed the same key first. */
  | "same_key"
  /** Any other lost race (a deadlock, a lock wait, a lost Galera certification, SQLITE_BUSY). */
  | "busy"
  /** Anything else: a bug or a broken schema, surfaced as it is. */
  | "other";

/** What the write does with a failed attempt of one kind. */
export interface WriteFailure {
  /**
   * `no`: answer at once. `next host`: run again at once on the writer's next host, once per other host,
   * with a deadline of its own (a frozen node may have taken all of the first). `backoff`: wait (jittered,
   * exponential: backoffMs) and run again, while the wait ends before the write's deadline.
   */
  readonly retry: "no" | "next host" | "backoff";
  /** At most this many attempts in all, besides the deadline. */
  readonly attempts?: number;
  /** What the write answers when it does not (or can no longer) go on. */
  readonly answer: (error: unknown) => unknown;
}

/**
 * How often a write is tried when it keeps hitting the same unique key
 * (ER_DUP_ENTRY, SQLite's constraint errors). Every lost race means another
 * writer committed the key, so a burst drains in 1 or 2 attempts (measured in
 * test/storage/write-races.test.ts, RACE_STATS=1); a duplicate key that
 * persists past 8 attempts is not a race any more.
 */
const duplicateKeyAttempts = 8;

/** What a write answers when the node's broken triggers (run/broken-triggers.ts) could not be mended in time. */
const brokenTriggersMessage =
  "The registry's database node could not take the write now (its triggers failed to load); nothing was saved. " +
  "Try again.";

/** The table: each kind of failure, and what the write does with it. */
export const writeFailures: Readonly<Record<WriteFailureKind, WriteFailure>> = {
  answered: { retry: "no", answer: (error) => error },
  // The statement failed whole (a CALL's COMMIT is its last statement, so nothing was committed either). The
  // triggers are reloaded (sql-writer.ts), then the write runs again: on a cluster a brute-force abort can break
  // a new instance again, and the backoff lets those writes finish first. Nothing was written, so it is
  // UNAVAILABLE (retry) when out of time, never INTERNAL.
  broken_triggers: { retry: "backoff", answer: (error) => unavailable(error, brokenTriggersMessage) },
  // Say so, not "failed".
  lost_at_commit: { retry: "no", answer: (error) => outcomeUnknown(error) },
  node_failed: { retry: "next host", answer: (error) => unavailable(error) },
  unavailable: { retry: "no", answer: (error) => unavailable(error) },
  // Rolled back, nothing written: run again until the burst drains.
  same_key: { retry: "backoff", attempts: duplicateKeyAttempts, answer: (error) => writeConflict(error, "same key") },
  busy: { retry: "backoff", answer: (error) => writeConflict(error, "busy tenant") },
  other: { retry: "no", answer: (error) => error },
};

/** The kind of a failed attempt: `committing` once its COMMIT (or the CALL that commits) was sent. */
export function writeFailureOf(error: unknown, { dialect, committing }: WriteAttempt): WriteFailureKind {
  if (error instanceof RegistryError) return "answered";
  if (dialect === "mysql" && isBrokenTriggers(error)) return "broken_triggers";
  switch (classifyDriverError(error)) {
    case "unavailable":
      if (committing) return "lost_at_commit";
      return isNodeFailure(error) ? "node_failed" : "unavailable";
    case "retryable":
      return isDuplicateKey(error) ? "same_key" : "busy";
    default:
      return "other";
  }
}

/** Where an attempt got to: its database, and whether its COMMIT was sent. */
export interface WriteAttempt {
  readonly dialect: Dialect;
  committing: boolean;
}

/**
 * The retry cause a lost race (`same_key`, `busy`) is counted under. A deadlock error at COMMIT is no InnoDB
 * deadlock (those happen on a statement's lock): it is Galera's lost certification.
 */
export function raceCauseOf(error: unknown, committing: boolean): WriteRetryCause {
  const race = raceKind(error);
  return race === "deadlock" && committing ? "certification" : race;
}

/** Base of the exponential backoff between attempts. */
const backoffBaseMs = 5;

/**
 * The longest single wait between attempts. 300 new agents at once over a 3-node Galera cluster
 * (test/cluster/certification.test.ts, one run each): the last answered after 6.1 s with 500, 4.2 s with 200.
 */
const backoffCapMs = 200;

/** The wait before attempt `attempt + 1`: exponential with full jitter, so racing writers spread out. */
export function backoffMs(attempt: number): number {
  return Math.random() * Math.min(backoffCapMs, backoffBaseMs * 2 ** attempt);
}
