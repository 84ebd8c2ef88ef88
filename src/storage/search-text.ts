/**
 * MySQL's full-text text (`definition_text`), written after a write's COMMIT
 * instead of inside its transaction, and repaired when that did not happen.
 *
 * The text only scores `orderBy=relevance` (queries/search.ts,
 * relevanceScore): which definitions match `q`, and how many, comes from the
 * term rows, written in the transaction. InnoDB does a FULLTEXT index's work
 * at COMMIT, and since issue 20 a write holds its tenant's revision counter
 * until its COMMIT ends: in the transaction, that work ran one write at a
 * time per tenant (POST of an existing key at 0.54x; docs/decisions.md, "The
 * full-text text after COMMIT"). Written by its write's own connection right
 * after COMMIT, a second COMMIT per write (a second redo log flush) still cost
 * 20 % (0.76x; BENCHMARKS.md). So each process queues its writes' texts and
 * one writer at a time writes all that are queued in one statement and one
 * COMMIT (keepTextsStatement), guarded by the revision each text belongs to
 * (of two writes of one version, the later revision's text stays, whichever
 * arrives last). A write answers without waiting for its text; a relevance
 * search waits for the texts its process queued before it (flushed()), so a
 * client that wrote and then searches through the same process finds its
 * text; through another replica, a moment later.
 *
 * What can go wrong: the statement fails (a lost connection, a node failure)
 * or the process dies with texts queued. Those versions' texts are then older
 * than the versions (`text_revision < mod_revision`, migration 0016), and only
 * their relevance scores are: repair() finds such rows and writes their text
 * from the stored document. Each process repairs once when it starts (in the
 * background, a scan of agent_definitions) and again shortly after any of its
 * own writes of texts failed. A status change also raises mod_revision
 * without changing the text; repair writes the same text again for those,
 * which changes no full-text entry.
 */
import type { Knex } from "knex";
import type { Logger } from "../logger.js";
import { keepTextsStatement, searchTextOf } from "./queries/search-index.js";
import { fromDocument } from "./rows.js";
import { mysqlStatements, type RunStatement } from "./run/writes.js";

/** A version's full-text text, to be written after its write committed at `revision`. */
export interface KeptText {
  readonly tenant: string;
  readonly id: string;
  readonly text: string;
  readonly revision: number;
}

/** Versions read per repair statement, and the most texts one statement writes. */
const batch = 500;

/** How long after a failed text write the repair runs (so a burst of failures makes one). */
const repairDelayMs = 1_000;

/**
 * MySQL. Bindings: seq, limit. The versions after seq whose text is missing or older than their last change, in
 * seq order; staged rows (no agent number yet, migration 0014) are not definitions yet.
 */
const staleTexts =
  "SELECT d.seq, d.tenant, d.id, d.mod_revision, d.document FROM agent_definitions d " +
  "LEFT JOIN definition_text x ON x.seq = d.seq " +
  "WHERE d.seq > ? AND d.agent_number IS NOT NULL AND (x.seq IS NULL OR x.text_revision < d.mod_revision) " +
  "ORDER BY d.seq LIMIT ?";

interface StaleRow {
  readonly seq: number | string;
  readonly tenant: string;
  readonly id: string;
  readonly mod_revision: number | string;
  readonly document: string;
}

export class SearchTextKeeper {
  readonly #db: Knex;
  /** Writes the texts (the reads of repair() go through knex). */
  readonly #statement: RunStatement;
  readonly #logger: Pick<Logger, "warn" | "info"> | undefined;
  /** Texts queued and not yet being written. */
  #queue: KeptText[] = [];
  /** How many texts were ever queued, and how many of the first of them are written (or failed). */
  #queued = 0;
  #done = 0;
  /** Who waits for the texts queued before them: until #done reaches `upTo`. */
  #waiting: Array<{ upTo: number; resolve: () => void }> = [];
  #writing = false;
  #repairing: Promise<void> | undefined;
  #again = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  #failures = 0;

  constructor(db: Knex, logger: Pick<Logger, "warn" | "info"> | undefined) {
    this.#db = db;
    this.#statement = mysqlStatements(db);
    this.#logger = logger;
  }

  /** Texts whose write failed since the process started (each is repaired). */
  get failures(): number {
    return this.#failures;
  }

  /**
   * Queues the texts of a write that committed; they are written soon, with the texts other writes queued
   * meanwhile. Never throws and never waits: the write is committed whatever happens to them, and a text
   * that is not written is repaired (scheduleRepair).
   */
  keep(texts: readonly KeptText[]): void {
    if (texts.length === 0) return;
    this.#queue.push(...texts);
    this.#queued += texts.length;
    if (!this.#writing) void this.#writeQueued();
  }

  /** Resolves when every text queued before the call is written, or its write failed (then it is repaired). */
  flushed(): Promise<void> {
    if (this.#done >= this.#queued) return Promise.resolve();
    return new Promise((resolve) => this.#waiting.push({ upTo: this.#queued, resolve }));
  }

  async #writeQueued(): Promise<void> {
    this.#writing = true;
    try {
      while (this.#queue.length > 0) {
        const texts = this.#queue.splice(0, batch);
        try {
          await this.#write(texts);
        } catch (error) {
          this.#failures += texts.length;
          this.#logger?.warn("search texts not written after commit; they will be repaired", {
            texts: texts.length,
            error: error instanceof Error ? error.message : String(error),
          });
          this.scheduleRepair();
        }
        this.#done += texts.length;
        const ready = this.#waiting.filter((waiter) => waiter.upTo <= this.#done);
        this.#waiting = this.#waiting.filter((waiter) => waiter.upTo > this.#done);
        for (const waiter of ready) waiter.resolve();
      }
    } finally {
      this.#writing = false;
    }
  }

  /** One statement, one COMMIT: the texts in (tenant, id) order, so that two processes lock rows alike. */
  async #write(texts: readonly KeptText[]): Promise<void> {
    const sorted = [...texts].sort((a, b) =>
      a.tenant === b.tenant ? (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) : a.tenant < b.tenant ? -1 : 1,
    );
    // Not through knex: each text is as large as its definition's searched text (~1 MB at most), and goes as a
    // prepared statement's parameter then (run/writes.ts, PREPARED_FROM_BYTES), never escaped into the text.
    await this.#statement(
      keepTextsStatement(sorted.length),
      sorted.flatMap(({ tenant, id, text, revision }) => [tenant, id, text, revision]),
    );
  }

  /** Runs repair() soon, once for any number of calls before it starts. */
  scheduleRepair(delayMs = repairDelayMs): void {
    if (this.#closed || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.repair();
    }, delayMs);
    this.#timer.unref?.();
  }

  /**
   * Writes the text of every version whose text is missing or older than its last change, from its stored
   * document; answers when a whole pass found nothing more (a call while a pass runs makes it run once more).
   * Never throws: a failure is logged and the repair scheduled again.
   */
  repair(): Promise<void> {
    if (this.#repairing !== undefined) {
      this.#again = true;
      return this.#repairing;
    }
    const pass = async (): Promise<void> => {
      do {
        this.#again = false;
        const written = await this.#pass();
        if (written > 0) this.#logger?.info("search text repaired", { definitions: written });
      } while (this.#again && !this.#closed);
    };
    this.#repairing = pass()
      .catch((error: unknown) => {
        if (this.#closed) return;
        this.#logger?.warn("search text repair failed; it will run again", {
          error: error instanceof Error ? error.message : String(error),
        });
        this.scheduleRepair(10 * repairDelayMs);
      })
      .finally(() => {
        this.#repairing = undefined;
      });
    return this.#repairing;
  }

  /** Writes what is queued, stops scheduling, and waits for a repair in flight to end its batch. */
  async close(): Promise<void> {
    await this.flushed();
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#repairing;
  }

  async #pass(): Promise<number> {
    let after: number | string = 0;
    let written = 0;
    for (;;) {
      if (this.#closed) return written;
      const rows = (await this.#db.raw(staleTexts, [after, batch]))[0] as StaleRow[];
      if (rows.length > 0)
        await this.#write(
          rows.map((row) => ({
            tenant: row.tenant,
            id: row.id,
            text: searchTextOf(fromDocument(row.document)),
            revision: Number(row.mod_revision),
          })),
        );
      written += rows.length;
      if (rows.length < batch) return written;
      after = rows[rows.length - 1]?.seq ?? after;
    }
  }
}
