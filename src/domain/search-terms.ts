/**
 * What the search index holds of a definition (DefinitionIndex: its terms,
 * each a row of the term index, and its full-text text), and the bound on how
 * many terms one definition may have (MAX_TERMS_PER_DEFINITION, issue 50): a
 * definition's write inserts a row per distinct term, so its cost follows
 * their count, not its bytes. One ~950 KB definition of distinct words made
 * about 76,000 rows; its write held SQLite's event loop 1.1-1.4 s, and four
 * at once on MySQL ran the process out of heap. No I/O.
 */
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { type Issue, issueAt } from "./errors.js";
import { forEachFilterValue, searchWordsOf, type TermKind, wordsOf } from "./list-query.js";

/**
 * MAX_TERMS_PER_DEFINITION's default. A megabyte of English prose (this
 * repository's docs) holds about 6,000 distinct words, and a definition's
 * filter values (skill ids, tags, resources) at most a few thousand more: an
 * ordinary large definition stays well under it, while one of distinct
 * made-up words (~76,000 in the 1 MiB body limit) does not.
 */
export const DEFAULT_MAX_TERMS_PER_DEFINITION = 20_000;

/** One term a definition is found by: an exact filter's value, or a word of `q` (kind `word`); never empty. */
export interface Term {
  readonly kind: TermKind;
  readonly value: string;
}

/**
 * What the search index holds of a definition, made in one pass over its texts (indexSteps): a write makes it
 * once, in its admission, and carries it to the transaction (issue 50: a 1 MB write made its terms four times,
 * each a synchronous pass over ~90,000 words).
 */
export interface DefinitionIndex {
  /**
   * The distinct terms, empty values left out, each once, in the order they come: the exact filters' values
   * (forEachFilterValue), then the words of searchableTextsOf as searchWordsOf folds them. The same content
   * gives the same terms in the same order.
   */
  readonly terms: readonly Term[];
  /**
   * The text of the databases' full-text indexes: the words (wordsOf) of the name, description, overview and
   * each skill's name, description and tags, separated by spaces.
   */
  readonly text: string;
}

/** The texts of the full-text text: the name, description, overview, and each skill's name, description and tags. */
function fullTextPartsOf(definition: AgentDefinition): string[] {
  const parts = [definition.name, definition.description, definition.overview ?? ""];
  for (const skill of definition.skills) parts.push(skill.name, skill.description, ...skill.tags.map((t) => t.tag));
  return parts;
}

/** Each host resource's tool name (the "resource names" of issue 24): searched by `q`, not in the full-text text. */
function toolNamesOf(definition: AgentDefinition): string[] {
  return definition.hostConfig.flatMap((item) => item.hostResources.map((resource) => resource.toolName));
}

/**
 * What `q` searches in: the name, description, overview, each skill's name,
 * description and tags, and each host resource's tool name (the "resource
 * names" of issue 24).
 */
export function searchableTextsOf(definition: AgentDefinition): string[] {
  return [...fullTextPartsOf(definition), ...toolNamesOf(definition)];
}

/**
 * Makes `definition`'s DefinitionIndex a text at a time: it yields after each searchable text (at most 10,000
 * characters each, as validation bounds them; a millisecond or so of work), so that its caller may give the
 * event loop back between (indexInTurns), and returns the index. definitionIndexOf runs it at once.
 *
 * The text is made part by part: the words of parts joined by spaces are the parts' words, in order (a space
 * is no letter or digit, and lowering a final sigma looks no further than the next letter).
 */
export function* indexSteps(definition: AgentDefinition): Generator<void, DefinitionIndex, void> {
  // The values seen, by kind: the words (most of a large definition's terms) keyed as they are, not by a
  // string made of kind and value for each of ~90,000 words.
  const seen = new Map<TermKind, Set<string>>();
  const terms: Term[] = [];
  const add = (kind: TermKind, value: string | undefined): void => {
    if (value === undefined || value === "") return;
    let values = seen.get(kind);
    if (values === undefined) seen.set(kind, (values = new Set()));
    if (values.has(value)) return;
    values.add(value);
    terms.push({ kind, value });
  };
  forEachFilterValue(definition, add);
  const seenWords = new Set<string>();
  const addWord = (value: string): void => {
    if (seenWords.has(value)) return;
    seenWords.add(value);
    terms.push({ kind: "word", value });
  };
  const words: string[] = [];
  for (const part of fullTextPartsOf(definition)) {
    for (const word of searchWordsOf(part)) addWord(word);
    for (const word of wordsOf(part)) words.push(word);
    yield;
  }
  for (const name of toolNamesOf(definition)) {
    for (const word of searchWordsOf(name)) addWord(word);
    yield;
  }
  return { terms, text: words.join(" ") };
}

/**
 * `definition`'s full-text text (DefinitionIndex.text) alone: what a text rewritten from a stored document
 * needs (storage's repair of MySQL's texts).
 */
export function fullTextOf(definition: AgentDefinition): string {
  return fullTextPartsOf(definition).flatMap(wordsOf).join(" ");
}

/** `definition`'s DefinitionIndex, made at once (indexSteps). */
export function definitionIndexOf(definition: AgentDefinition): DefinitionIndex {
  const steps = indexSteps(definition);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/**
 * Runs `steps` to their end, giving the event loop back (a turn of its own: its timers and I/O) whenever they
 * have run `sliceMs` since it last did; answers what they return. For CPU work that comes in small steps,
 * such as indexSteps: run at once, a large definition's held the loop for tens of milliseconds.
 */
export async function inTurns<T>(steps: Generator<void, T, void>, sliceMs: number): Promise<T> {
  let sliceStart = performance.now();
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    if (performance.now() - sliceStart >= sliceMs) {
      await new Promise((resolve) => setTimeout(resolve, 0));
      sliceStart = performance.now();
    }
  }
}

/** Two indexes that hold the same: the same terms in the same order, and the same text. */
export function sameIndex(a: DefinitionIndex, b: DefinitionIndex): boolean {
  if (a === b) return true;
  if (a.text !== b.text || a.terms.length !== b.terms.length) return false;
  return a.terms.every((term, i) => term.kind === b.terms[i]!.kind && term.value === b.terms[i]!.value);
}

/**
 * The issue of a definition with more than `max` distinct terms (MAX_TERMS_PER_DEFINITION), or undefined. It
 * names the top-level member that holds most of the definition's words, as the one to shorten. `count`: its
 * DefinitionIndex's terms.
 */
export function termCountIssue(definition: AgentDefinition, max: number, count: number): Issue | undefined {
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
