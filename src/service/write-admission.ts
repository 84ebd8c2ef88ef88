/**
 * What a write of a definition passes after its validation and before its
 * transaction (issue 50): its search index is made (once for the write: its
 * transaction, and each attempt of it, use this one), the bound on its terms
 * (MAX_TERMS_PER_DEFINITION) is checked, then it waits for its share of the
 * write budget (MAX_BUFFERED_WRITE_BYTES).
 */
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  type DefinitionIndex,
  indexSteps,
  inTurns,
  searchableTextsOf,
  termCountIssue,
} from "../domain/search-terms.js";
import { assertValid } from "../domain/validation.js";
import type { WriteBudget } from "./write-budget.js";

/**
 * What a write is weighed at in the write budget, per distinct term: its transaction makes a row of each
 * (the term, its key, its bindings, its share of a statement's text; on MySQL the statement's bytes too), and
 * about 1 KiB each is what the heap held while a write of ~76,000 terms ran.
 */
export const WRITE_BYTES_PER_TERM = 1024;

/**
 * The longest the index is made for before the event loop is given back: as long as SQLite's write
 * statements run at a time (storage/run/writes.ts, SQLITE_SLICE_MS).
 */
const INDEX_SLICE_MS = 10;

/** Resolves once the event loop has come round to its timers and I/O again. */
const nextTurn = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * The searched text (in UTF-16 code units) from which a definition's checks and its write's first statements
 * each take long enough to be given a turn of their own: about 5,000 words.
 */
const LARGE_TEXT = 64 * 1024;

/** An admitted write: its definition's search index, and the function that gives its share of the budget back. */
export interface AdmittedWrite {
  readonly index: DefinitionIndex;
  readonly release: () => void;
}

/**
 * Makes `definition`'s search index, checks its distinct terms against `maxTerms` (400 TOO_MANY_TERMS beyond)
 * and waits for its share of `budget`; resolves with the index, for the write to store, and the function that
 * gives the share back when the write is over. For a large definition, in turns of the event loop of its own,
 * and the write after it in another: its validation before, the index (in slices of INDEX_SLICE_MS), and
 * its transaction's first statements each take tens of milliseconds, and run as one they held the loop past
 * 50 ms. A small one goes on at once, as before.
 */
export async function admitDefinitionWrite(
  definition: AgentDefinition,
  maxTerms: number,
  budget: WriteBudget | undefined,
): Promise<AdmittedWrite> {
  const large = searchableTextsOf(definition).reduce((n, text) => n + text.length, 0) > LARGE_TEXT;
  if (large) await nextTurn();
  const index = await inTurns(indexSteps(definition), INDEX_SLICE_MS);
  const issue = termCountIssue(definition, maxTerms, index.terms.length);
  if (issue !== undefined) assertValid([issue]);
  const release = budget === undefined ? () => {} : await budget.take(index.terms.length * WRITE_BYTES_PER_TERM);
  if (large) await nextTurn();
  return { index, release };
}
