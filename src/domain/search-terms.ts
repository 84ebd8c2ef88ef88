/**
 * The terms a definition is found by (each a row of the term index, storage's
 * searchTermsOf), and the bound on how many one definition may have
 * (MAX_TERMS_PER_DEFINITION, issue 50): a definition's write inserts a row
 * per distinct term, so its cost follows their count, not its bytes. One
 * ~950 KB definition of distinct words made about 76,000 rows; its write held
 * SQLite's event loop 1.1-1.4 s, and four at once on MariaDB ran the process
 * out of heap. No I/O.
 */
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { type Issue, issueAt } from "./errors.js";
import { forEachFilterValue, searchWordsOf, type TermKind } from "./list-query.js";

/**
 * MAX_TERMS_PER_DEFINITION's default. A megabyte of English prose (this
 * repository's docs) holds about 6,000 distinct words, and a definition's
 * filter values (skill ids, tags, resources) at most a few thousand more: an
 * ordinary large definition stays well under it, while one of distinct
 * made-up words (~76,000 in the 1 MiB body limit) does not.
 */
export const DEFAULT_MAX_TERMS_PER_DEFINITION = 20_000;

/**
 * What `q` searches in: the name, description, overview, each skill's name,
 * description and tags, and each host resource's tool name (the "resource
 * names" of issue 24).
 */
export function searchableTextsOf(definition: AgentDefinition): string[] {
  const texts = [definition.name, definition.description, definition.overview ?? ""];
  for (const skill of definition.skills) texts.push(skill.name, skill.description, ...skill.tags.map((t) => t.tag));
  for (const item of definition.hostConfig) for (const resource of item.hostResources) texts.push(resource.toolName);
  return texts;
}

/**
 * Calls `add` with every (kind, value) the exact filters and `q` find
 * `definition` by, repeats and empty values included (callers skip them):
 * the filters' values (forEachFilterValue), then the words of
 * searchableTextsOf as searchWordsOf folds them.
 */
export function forEachTerm(
  definition: AgentDefinition,
  add: (kind: TermKind, value: string | undefined) => void,
): void {
  forEachFilterValue(definition, add);
  for (const text of searchableTextsOf(definition)) for (const word of searchWordsOf(text)) add("word", word);
}

/**
 * The distinct terms of `definition` (forEachTerm, empty values left out), as
 * the term index counts them: by kind and value.
 */
export function distinctTermCount(definition: AgentDefinition): number {
  const seen = new Set<string>();
  forEachTerm(definition, (kind, value) => {
    if (value !== undefined && value !== "") seen.add(`${kind}\u0000${value}`);
  });
  return seen.size;
}

/**
 * The issue of a definition with more than `max` distinct terms (MAX_TERMS_PER_DEFINITION), or undefined. It
 * names the top-level member that holds most of the definition's words, as the one to shorten.
 */
export function termCountIssue(
  definition: AgentDefinition,
  max: number,
  count = distinctTermCount(definition),
): Issue | undefined {
  if (count <= max) return undefined;
  const skills = definition.skills.reduce((n, s) => n + s.name.length + s.description.length, 0);
  const largest = [
    ["description", definition.description.length],
    ["overview", definition.overview?.length ?? 0],
    ["skills", skills],
  ].reduce((a, b) => (b[1] > a[1] ? b : a))[0] as string;
  return issueAt(
    largest,
    "TOO_MANY_TERMS",
    `The definition has ${count} distinct search terms (words and filter values); at most ${max} ` +
      `(MAX_TERMS_PER_DEFINITION) are indexed per definition. Shorten its texts (${largest} holds the most).`,
  );
}
