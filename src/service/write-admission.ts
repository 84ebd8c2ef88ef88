/**
 * What a write of a definition passes after its validation and before its
 * transaction (issue 50): the bound on its terms (MAX_TERMS_PER_DEFINITION).
 */
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { searchableTextsOf, termCountIssue } from "../domain/search-terms.js";
import { assertValid } from "../domain/validation.js";

/** Resolves once the event loop has come round to its timers and I/O again. */
const nextTurn = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * The searched text (in UTF-16 code units) from which a definition's checks and its write's first statements
 * each take long enough to be given a turn of their own: about 5,000 words.
 */
const LARGE_TEXT = 64 * 1024;

/**
 * Checks `definition`'s distinct terms against `maxTerms` (400 TOO_MANY_TERMS beyond). For a large
 * definition, in a turn of the event loop of its own, and the write after it in another: its validation
 * before, the count, and its transaction's first statements (which make its terms again) each take tens of
 * milliseconds, and run as one they held the loop past 50 ms. A small one goes on at once, as before.
 */
export async function admitDefinitionWrite(definition: AgentDefinition, maxTerms: number): Promise<void> {
  const large = searchableTextsOf(definition).reduce((n, text) => n + text.length, 0) > LARGE_TEXT;
  if (large) await nextTurn();
  const issue = termCountIssue(definition, maxTerms);
  if (issue !== undefined) assertValid([issue]);
  if (large) await nextTurn();
}
