/**
 * The side rows migration 0009 writes for the definitions stored before it:
 * their exact-filter terms (definition_terms) and keyword text
 * (definition_text on MySQL, definition_fts on SQLite).
 *
 * Frozen: a copy of search-index.ts's searchTermsOf, searchTextOf and
 * insertSideRows, and of list-query.ts's wordsOf, as they were when 0009
 * shipped (issue 11; copied here in issue 23). Never change it. The write
 * path keeps its own (search-index.ts) and may change; a term kind added
 * there later gets its own backfill migration, which must not find its rows
 * already written by this one (a primary key clash on a database upgrading
 * from 0008).
 */
import type { Knex } from "knex";
import type { AgentDefinition } from "../../../../gen/asor/v1/agent_definition_pb.js";
import type { Dialect } from "../dialect.js";

/** definition_terms.kind of each exact filter, as 0009 numbered them. */
const kinds = {
  name: 1,
  provider: 2,
  platform: 3,
  version: 4,
  tag: 5,
  skillId: 6,
  executionMode: 7,
  resource: 8,
  externalAgentID: 9,
} as const;

/** A definition stored with nothing indexed yet. */
export interface Unindexed {
  readonly seq: number | string;
  readonly tenant: string;
  readonly status: string;
  readonly latest: boolean;
  readonly definition: AgentDefinition;
}

interface Term {
  readonly kind: number;
  readonly value: string;
}

/** Every (kind, value) the exact filters find `definition` by, each once; empty values are left out. */
function termsOf(definition: AgentDefinition): Term[] {
  const seen = new Set<string>();
  const terms: Term[] = [];
  const add = (kind: keyof typeof kinds, value: string | undefined): void => {
    if (value === undefined || value === "") return;
    const code = kinds[kind];
    const key = `${code}\u0000${value}`;
    if (seen.has(key)) return;
    seen.add(key);
    terms.push({ kind: code, value });
  };
  add("name", definition.name);
  add("provider", definition.provider?.id);
  add("platform", definition.platform?.id);
  add("version", definition.version);
  add("externalAgentID", definition.externalAgentId);
  for (const skill of definition.skills) {
    add("skillId", skill.id);
    for (const tag of skill.tags) add("tag", tag.tag);
  }
  for (const item of definition.hostConfig) {
    add("executionMode", item.executionMode?.id);
    for (const resource of item.hostResources) add("resource", resource.agentResource?.id);
  }
  return terms;
}

/** The words of the name, description, overview and skills: runs of letters and digits, lower case, space-separated. */
function textOf(definition: AgentDefinition): string {
  const parts = [definition.name, definition.description, definition.overview ?? ""];
  for (const skill of definition.skills) parts.push(skill.name, skill.description, ...skill.tags.map((t) => t.tag));
  return (
    parts
      .join(" ")
      .toLowerCase()
      .match(/[\p{L}\p{N}]+/gu) ?? []
  ).join(" ");
}

/** Rows per multi-row INSERT: 1,000 term rows bind 6,000 values, well inside SQLite's 32,766. */
const rowsPerInsert = 1_000;

/** Writes the terms and text of `definitions`, in multi-row inserts; `run` runs one statement. */
export async function insertSideRows(
  dialect: Dialect,
  run: (sql: string, bindings: Knex.Value[]) => Promise<unknown>,
  definitions: readonly Unindexed[],
): Promise<void> {
  const insertText =
    dialect === "mysql"
      ? "INSERT INTO definition_text (seq, tenant, status, is_latest, body)"
      : "INSERT INTO definition_fts (rowid, tenant, status, is_latest, body)";
  const values = (rows: number, columns: number) =>
    Array.from({ length: rows }, () => `(${Array.from({ length: columns }, () => "?").join(", ")})`).join(", ");
  const terms: Knex.Value[][] = [];
  const texts: Knex.Value[][] = [];
  for (const { seq, tenant, status, latest, definition } of definitions) {
    const flag = latest ? 1 : 0;
    for (const term of termsOf(definition)) terms.push([seq, term.kind, term.value, tenant, status, flag]);
    texts.push([seq, tenant, status, flag, textOf(definition)]);
  }
  for (let at = 0; at < terms.length; at += rowsPerInsert) {
    const chunk = terms.slice(at, at + rowsPerInsert);
    await run(
      `INSERT INTO definition_terms (seq, kind, value, tenant, status, is_latest) VALUES ${values(chunk.length, 6)}`,
      chunk.flat(),
    );
  }
  for (let at = 0; at < texts.length; at += rowsPerInsert) {
    const chunk = texts.slice(at, at + rowsPerInsert);
    await run(`${insertText} VALUES ${values(chunk.length, 5)}`, chunk.flat());
  }
}
