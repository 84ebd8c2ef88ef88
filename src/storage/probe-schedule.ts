/**
 * The prober's schedule (issue 44, item 5; migration 0021): which versions are due for a probe, leased in batches
 * so that several processes on one database probe each version once per interval between them. On MySQL a batch
 * is taken in a transaction: the due rows read `FOR UPDATE SKIP LOCKED` (another process's batch being taken is
 * skipped, not waited for), then leased. On SQLite, one writer, one UPDATE leases them. A lease ends at its time:
 * a process killed with rows leased leaves them to whoever claims after that. Cold path: on knex, on the writer.
 */
import { randomBytes } from "node:crypto";
import type { Knex } from "knex";
import { type LivenessRow, type LivenessStatements, livenessStatements } from "./queries/liveness.js";
import type { DueProbe, Finished, ProbeSchedule } from "./repository.js";
import { toDatabaseTimestamp } from "./rows.js";
import type { Dialect } from "./run/connection.js";
import { toLivenessNow } from "./write-liveness.js";

/**
 * The schedule on `db` (the writer's connections); its counts for the metrics on `reads` (the reads'), so a scrape
 * never waits for the writer (on SQLite its one connection, held by each write transaction whole).
 */
export function createProbeSchedule(db: Knex, dialect: Dialect, reads: Knex = db): ProbeSchedule {
  return new SqlProbeSchedule(db, dialect, reads);
}

/** The rows a knex.raw answered: mysql2 answers [rows, fields], the SQLite client the rows. */
function rowsOf<T>(result: unknown): T[] {
  if (Array.isArray(result) && Array.isArray(result[0])) return result[0] as T[];
  return Array.isArray(result) ? (result as T[]) : [];
}

/** The rows a knex.raw changed: mysql2's ResultSetHeader, the SQLite client's `{ changes }`. */
function changedBy(result: unknown): number {
  const header = (Array.isArray(result) ? result[0] : result) as { affectedRows?: number; changes?: number } | null;
  return Number(header?.affectedRows ?? header?.changes ?? 0);
}

class SqlProbeSchedule implements ProbeSchedule {
  readonly #db: Knex;
  readonly #reads: Knex;
  readonly #mysql: boolean;
  readonly #sql: LivenessStatements;

  constructor(db: Knex, dialect: Dialect, reads: Knex) {
    this.#db = db;
    this.#reads = reads;
    this.#mysql = dialect === "mysql";
    this.#sql = livenessStatements(dialect);
  }

  async seed(from: Date, spreadMs: number, limit: number): Promise<number> {
    const spread = Math.max(1, Math.round(spreadMs));
    return changedBy(await this.#db.raw(this.#sql.seed, [toDatabaseTimestamp(from), spread, limit]));
  }

  async claim(owner: string, limit: number, now: Date, leaseUntil: Date): Promise<DueProbe[]> {
    if (limit <= 0) return [];
    // The lease's own time, unique to this claim (the owner's and a random part): the rows it leased are read by it.
    const claimOwner = `${owner.slice(0, 24)}${randomBytes(4).toString("hex")}`;
    const until = toDatabaseTimestamp(leaseUntil);
    const at = toDatabaseTimestamp(now);
    if (this.#mysql) {
      await this.#db.transaction(async (trx) => {
        const due = rowsOf<Pick<LivenessRow, "tenant" | "definition_id">>(
          await trx.raw(this.#sql.due, [at, at, limit]),
        );
        for (const row of due) await trx.raw(this.#sql.lease, [until, claimOwner, row.tenant, row.definition_id]);
      });
    } else {
      await this.#db.raw(this.#sql.leaseDue, [until, claimOwner, at, at, limit]);
    }
    const leased = rowsOf<LivenessRow>(await this.#db.raw(this.#sql.leased, [claimOwner, until]));
    return leased.map((row) => ({ tenant: row.tenant, id: row.definition_id, now: toLivenessNow(row) }));
  }

  async current(tenant: string, id: string) {
    const [row] = rowsOf<LivenessRow>(await this.#db.raw(this.#sql.row, [tenant, id]));
    return toLivenessNow(row);
  }

  async finish(tenant: string, id: string, failures: number, dueAt: Date): Promise<void> {
    await this.#db.raw(this.#sql.finish, [tenant, id, failures, toDatabaseTimestamp(dueAt)]);
  }

  async finishAll(batch: readonly Finished[]): Promise<void> {
    if (batch.length === 0) return;
    await this.#db.transaction(async (trx) => {
      for (const { tenant, id, failures, dueAt } of batch)
        await trx.raw(this.#sql.finish, [tenant, id, failures, toDatabaseTimestamp(dueAt)]);
    });
  }

  async states(): Promise<Record<string, number>> {
    const rows = rowsOf<{ state: string; n: number | string }>(await this.#reads.raw(this.#sql.states));
    return Object.fromEntries(rows.map((row) => [row.state, Number(row.n)]));
  }
}
