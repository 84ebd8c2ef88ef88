/**
 * The word terms migration 0013 writes for the definitions stored before it
 * (definition_terms rows of kind 10, one per distinct word).
 *
 * Frozen: a copy of list-query.ts's searchWordsOf (MIN_WORD_LENGTH,
 * MAX_WORD_LENGTH) and of search-index.ts's searchableTextsOf and the word
 * part of searchTermsOf, as they were when 0013 shipped (issue 24). Never
 * change it. The write path keeps its own and may change; a change of the
 * words there gets a migration of its own.
 */
import type { Knex } from "knex";
import type { AgentDefinition } from "../../../../gen/asor/v1/agent_definition_pb.js";

/** definition_terms.kind of a word, as 0013 numbered it. */
const wordKind = 10;
const minWordLength = 3;
const maxWordLength = 255;

/** A definition stored before 0013, to be given its word terms. */
export interface Unworded {
  readonly seq: number | string;
  readonly tenant: string;
  readonly status: string;
  readonly latest: boolean;
  readonly definition: AgentDefinition;
}

/** Folded words of `text`: NFKD, lower case, NFKD, marks dropped; runs of letters and digits, 3 to 255 code points. */
function wordsOf(text: string): string[] {
  const folded = text.normalize("NFKD").toLowerCase().normalize("NFKD").replace(/\p{M}/gu, "");
  const words: string[] = [];
  for (const run of folded.match(/[\p{L}\p{N}]+/gu) ?? []) {
    const points = [...run];
    if (points.length < minWordLength) continue;
    words.push(points.length > maxWordLength ? points.slice(0, maxWordLength).join("") : run);
  }
  return words;
}

/** The texts searched: name, description, overview, skills' names, descriptions and tags, host resources' tool names. */
function textsOf(definition: AgentDefinition): string[] {
  const texts = [definition.name, definition.description, definition.overview ?? ""];
  for (const skill of definition.skills) texts.push(skill.name, skill.description, ...skill.tags.map((t) => t.tag));
  for (const item of definition.hostConfig) for (const resource of item.hostResources) texts.push(resource.toolName);
  return texts;
}

/** Each distinct word of `definition`, in first-seen order. */
export function wordTermsOf(definition: AgentDefinition): string[] {
  return [...new Set(textsOf(definition).flatMap(wordsOf))];
}

/** Rows per multi-row INSERT: 1,000 term rows bind 6,000 values, well inside SQLite's 32,766. */
const rowsPerInsert = 1_000;

/**
 * Writes the word terms of `definitions`, in multi-row inserts; a row that is
 * there already (written by a run of 0013 that died halfway) is left as it
 * is, so a run again completes. `run` runs one statement.
 */
export async function insertWordTerms(
  dialect: "mysql" | "sqlite",
  run: (sql: string, bindings: Knex.Value[]) => Promise<unknown>,
  definitions: readonly Unworded[],
): Promise<void> {
  const rows: Knex.Value[][] = [];
  for (const { seq, tenant, status, latest, definition } of definitions)
    for (const word of wordTermsOf(definition)) rows.push([seq, wordKind, word, tenant, status, latest ? 1 : 0]);
  // MySQL: a no-op update of a row there already (the counters' update trigger moves nothing);
  // SQLite: skipped, no trigger fires.
  const onConflict = dialect === "mysql" ? "ON DUPLICATE KEY UPDATE seq = seq" : "ON CONFLICT DO NOTHING";
  for (let at = 0; at < rows.length; at += rowsPerInsert) {
    const chunk = rows.slice(at, at + rowsPerInsert);
    await run(
      `INSERT INTO definition_terms (seq, kind, value, tenant, status, is_latest) VALUES ${chunk
        .map(() => "(?, ?, ?, ?, ?, ?)")
        .join(", ")} ${onConflict}`,
      chunk.flat(),
    );
  }
}
