/**
 * What the list's filters and keyword search find a definition by, made from
 * the definition itself, and kept in the side tables of migration 0009 inside
 * the write transaction that stores it (indexDefinition). The bench's
 * seeding writes its own through insertSideRows.
 *
 * The status and is_latest copies in the side tables are the triggers' job
 * (0009): indexDefinition copies them from the row as it is at that moment,
 * and any later change of either in the same or a later transaction is
 * carried over by the update trigger. The counters' shards (seq % 16) are
 * the triggers' too: the list sums every shard of a counter, so nothing here
 * knows how many there are.
 *
 * Migration 0009 indexed the definitions stored before it with its own frozen
 * copy of these functions (migrations/frozen/0009-side-rows.ts): a change
 * here reaches the rows written from then on, not that migration.
 */
import type { AgentDefinition } from "../../../gen/asor/v1/agent_definition_pb.js";
import type { TermKind } from "../../domain/list-query.js";
import { type DefinitionIndex, definitionIndexOf, fullTextOf, type Term } from "../../domain/search-terms.js";
import type { Dialect } from "../run/connection.js";
import type { WriteBinding } from "../run/writes.js";
import type { WriteContext } from "./writes.js";

/** How each exact filter's kind is stored in definition_terms.kind. Never renumber. */
export const TERM_KINDS: Readonly<Record<TermKind, number>> = {
  name: 1,
  provider: 2,
  platform: 3,
  version: 4,
  tag: 5,
  skillId: 6,
  executionMode: 7,
  resource: 8,
  externalAgentID: 9,
  word: 10,
};

/** One row of definition_terms without its definition's columns. */
export interface SearchTerm {
  readonly kind: number;
  readonly value: string;
}

/**
 * Every (kind, value) the exact filters and `q` find `definition` by
 * (domain/search-terms.ts, DefinitionIndex's terms), each once; empty values are left out.
 */
export function searchTermsOf(definition: AgentDefinition): SearchTerm[] {
  return termRowsOf(definitionIndexOf(definition).terms);
}

/** A DefinitionIndex's terms as definition_terms holds them (TERM_KINDS). */
function termRowsOf(terms: readonly Term[]): SearchTerm[] {
  return terms.map(({ kind, value }) => ({ kind: TERM_KINDS[kind], value }));
}

/**
 * The text of the databases' full-text indexes (definition_text,
 * definition_fts; since issue 24 `q` finds its matches by the `word` terms,
 * and this text only scores them for orderBy=relevance, search.ts's
 * relevanceScore): DefinitionIndex's text, the words of the name,
 * description, overview, and each skill's name, description and tags,
 * separated by spaces. Both engines then split it the same way (MariaDB's
 * FULLTEXT parser and FTS5's unicode61 both break on spaces and keep letters
 * and digits together).
 */
export function searchTextOf(definition: AgentDefinition): string {
  return fullTextOf(definition);
}

/** The statements indexDefinition runs, for one dialect. */
interface IndexStatements {
  /**
   * Bindings: tenant, id, tenant, id. What is indexed of the definition, in one
   * round trip: a row with its seq, status, is_latest and indexed text (kind
   * NULL), and a row per term (kind and value set), in no particular order.
   */
  readonly indexed: string;
  /** Bindings: seq, kind, value. */
  readonly deleteTerm: string;
  /** Bindings: seq, then kind, value per term: several terms of one definition in one statement. */
  readonly deleteTerms: (terms: number) => string;
  readonly insertTerms: (rows: number) => string;
  /** Bindings: seq (SQLite only: FTS5 has no upsert). */
  readonly deleteText: string | undefined;
  /** Bindings: seq, tenant, status, is_latest, body. */
  readonly upsertText: string;
  /** Bindings: seq, tenant, status, is_latest, body, per row; for rows not indexed yet. */
  readonly insertTexts: (rows: number) => string;
}

const statementsByDialect = new Map<Dialect, IndexStatements>();

function indexStatements(dialect: Dialect): IndexStatements {
  let statements = statementsByDialect.get(dialect);
  if (statements === undefined) {
    const mysql = dialect === "mysql";
    const termsOfDefinition =
      "SELECT t.seq, NULL, NULL, NULL, t.kind, t.value FROM agent_definitions d " +
      "JOIN definition_terms t ON t.seq = d.seq WHERE d.tenant = ? AND d.id = ?";
    const insertText = mysql
      ? "INSERT INTO definition_text (seq, tenant, status, is_latest, body)"
      : "INSERT INTO definition_fts (rowid, tenant, status, is_latest, body)";
    statements = {
      indexed: `SELECT d.seq, d.status, d.is_latest, x.body, NULL AS kind, NULL AS value FROM agent_definitions d ${
        mysql ? "LEFT JOIN definition_text x ON x.seq = d.seq" : "LEFT JOIN definition_fts x ON x.rowid = d.seq"
      } WHERE d.tenant = ? AND d.id = ?
        UNION ALL
        ${termsOfDefinition}`,
      deleteTerm: "DELETE FROM definition_terms WHERE seq = ? AND kind = ? AND value = ?",
      // Each term an equality on the primary key (seq, kind, value): one range of it per term.
      deleteTerms: (terms) =>
        "DELETE FROM definition_terms WHERE seq = ? AND (" +
        Array.from({ length: terms }, () => "(kind = ? AND value = ?)").join(" OR ") +
        ")",
      insertTerms: (rows) =>
        "INSERT INTO definition_terms (seq, kind, value, tenant, status, is_latest) VALUES " +
        Array.from({ length: rows }, () => "(?, ?, ?, ?, ?, ?)").join(", "),
      deleteText: mysql ? undefined : "DELETE FROM definition_fts WHERE rowid = ?",
      upsertText: `${insertText} VALUES (?, ?, ?, ?, ?)${mysql ? " ON DUPLICATE KEY UPDATE body = VALUES(body)" : ""}`,
      insertTexts: (rows) => `${insertText} VALUES ${Array.from({ length: rows }, () => "(?, ?, ?, ?, ?)").join(", ")}`,
    };
    statementsByDialect.set(dialect, statements);
  }
  return statements;
}

/** A definition stored with nothing indexed yet, as insertSideRows indexes it. */
export interface Unindexed {
  readonly seq: number | string;
  readonly tenant: string;
  readonly status: string;
  readonly latest: boolean;
  readonly definition: AgentDefinition;
}

/** Rows per multi-row INSERT: 1,000 term rows bind 6,000 values, well inside SQLite's 32,766. */
const rowsPerInsert = 1_000;

/** Terms per DELETE of an update's removed terms (MySQL): a statement of at most ~6 KB. */
const rowsPerDelete = 200;

/** The bindings of the side rows of some definitions: what insertSideRows writes. */
export interface SideRows {
  /** seq, kind, value, tenant, status, is_latest per term row. */
  readonly terms: WriteBinding[][];
  /** seq, tenant, status, is_latest, body per text row. */
  readonly texts: WriteBinding[][];
}

/**
 * The side rows (terms and text) of definitions stored with nothing indexed
 * yet, made by the same functions as the write path: the first half of
 * insertSideRows, apart so a caller may make them elsewhere (the bench's
 * seeding, in worker threads) and write them with writeSideRows.
 */
export function sideRowsOf(definitions: readonly Unindexed[]): SideRows {
  const terms: WriteBinding[][] = [];
  const texts: WriteBinding[][] = [];
  for (const { seq, tenant, status, latest, definition } of definitions) {
    const flag = latest ? 1 : 0;
    const index = definitionIndexOf(definition);
    for (const term of termRowsOf(index.terms)) terms.push([seq, term.kind, term.value, tenant, status, flag]);
    texts.push([seq, tenant, status, flag, index.text]);
  }
  return { terms, texts };
}

/**
 * Writes side rows made by sideRowsOf in multi-row inserts of up to
 * `rowsPerStatement` rows (at most 5,000: SQLite's 32,766 bindings).
 */
export async function writeSideRows(
  dialect: Dialect,
  run: (sql: string, bindings: WriteBinding[]) => Promise<unknown>,
  { terms, texts }: SideRows,
  rowsPerStatement = rowsPerInsert,
): Promise<void> {
  const sql = indexStatements(dialect);
  const per = Math.max(1, Math.min(rowsPerStatement, 5_000));
  for (let at = 0; at < terms.length; at += per) {
    const chunk = terms.slice(at, at + per);
    await run(sql.insertTerms(chunk.length), chunk.flat());
  }
  for (let at = 0; at < texts.length; at += per) {
    const chunk = texts.slice(at, at + per);
    await run(sql.insertTexts(chunk.length), chunk.flat());
  }
}

/**
 * Writes the side rows (terms and text) of definitions stored with nothing
 * indexed yet, in multi-row inserts: what the bench's seeding needs, from
 * the same functions and statements as the write path. `run` runs one
 * statement with its bindings.
 */
export async function insertSideRows(
  dialect: Dialect,
  run: (sql: string, bindings: WriteBinding[]) => Promise<unknown>,
  definitions: readonly Unindexed[],
): Promise<void> {
  await writeSideRows(dialect, run, sideRowsOf(definitions));
}

const termKey = (term: SearchTerm): string => `${term.kind}\u0000${term.value}`;

/** What the index needs of the definition's row: its seq, status, latest flag and the keyword text indexed so far. */
interface IndexedRow {
  readonly seq: number | string;
  readonly status: string;
  readonly is_latest: number | boolean;
  readonly body: string | null;
}

/**
 * Brings the side rows of the definition `id` of `tenant` in line with
 * `index` (its definition's DefinitionIndex, made once per write: domain/search-terms.ts): its terms and its
 * keyword text. `inserted` is the seq of a row
 * the same transaction has just inserted (ACTIVE, latest, nothing indexed: no
 * read needed); without it the row was updated, and the index reads what is
 * indexed (one statement) and writes only the difference, so rewriting a
 * definition whose filters and words stay costs one read and no write to the
 * side tables or the full-text index. On MySQL new terms go in statements of
 * up to rowsPerInsert rows, and the terms an update lost in others; on
 * SQLite row by row through one prepared statement each, so the statement
 * cache holds one shape, not one per count.
 *
 * The keyword text: SQLite's is written here, in the transaction. MySQL's is
 * answered instead, for the caller to write after COMMIT (keepTextsStatement,
 * search-text.ts): InnoDB does a FULLTEXT index's work at COMMIT, and since
 * issue 20 every write holds its tenant's revision counter until its COMMIT
 * ends, so in the transaction that work ran one write at a time per tenant
 * (docs/decisions.md, "The full-text text after COMMIT").
 */
export async function indexDefinition(
  { session, statements }: WriteContext,
  tenant: string,
  id: string,
  index: DefinitionIndex,
  inserted?: number,
): Promise<string | undefined> {
  const sql = indexStatements(statements.dialect);
  const fresh = inserted !== undefined;
  const rows = fresh
    ? []
    : await session.rows<IndexedRow & { kind: number | string | null; value: string | null }>(sql.indexed, [
        tenant,
        id,
        tenant,
        id,
      ]);
  const row: IndexedRow | undefined = fresh
    ? { seq: inserted, status: "ACTIVE", is_latest: true, body: null }
    : rows.find((r) => r.kind === null);
  if (row === undefined)
    throw new Error(`Agent definition ${id} of tenant "${tenant}" vanished inside its own write transaction.`);
  const seq = Number(row.seq);
  const latest = row.is_latest ? 1 : 0;

  let terms = termRowsOf(index.terms);
  if (!fresh) {
    const wanted = new Set(terms.map(termKey));
    const indexed = rows.flatMap((r) =>
      r.kind === null || r.value === null ? [] : [{ kind: Number(r.kind), value: r.value }],
    );
    const have = new Set(indexed.map(termKey));
    const gone = indexed.filter((old) => !wanted.has(termKey(old)));
    if (statements.dialect === "mysql") {
      // A round trip, a socket write and a wake-up of the server per statement: the terms an edit removes (a
      // description rewritten drops tens of words) go in as few statements as rowsPerDelete allows.
      for (let i = 0; i < gone.length; i += rowsPerDelete) {
        const chunk = gone.slice(i, i + rowsPerDelete);
        await session.change(sql.deleteTerms(chunk.length), [seq, ...chunk.flatMap((t) => [t.kind, t.value])]);
      }
    } else {
      for (const old of gone) await session.change(sql.deleteTerm, [seq, old.kind, old.value]);
    }
    terms = terms.filter((t) => !have.has(termKey(t)));
  }
  const termRow = (term: SearchTerm): WriteBinding[] => [seq, term.kind, term.value, tenant, row.status, latest];
  if (statements.dialect === "mysql") {
    // At most rowsPerInsert rows a statement: one statement of every term of a large definition (76,000 before
    // MAX_TERMS_PER_DEFINITION) was a string and a packet of several MB, built at once (issue 50).
    for (let at = 0; at < terms.length; at += rowsPerInsert) {
      const chunk = terms.slice(at, at + rowsPerInsert);
      await session.change(sql.insertTerms(chunk.length), chunk.flatMap(termRow));
    }
  } else {
    const one = sql.insertTerms(1);
    for (const term of terms) await session.change(one, termRow(term));
  }

  const { text } = index;
  // MySQL: after COMMIT (search-text.ts), whatever the row holds now: an earlier write's text may still be on its way.
  if (statements.dialect === "mysql") return text;
  if (row.body === text) return undefined;
  if (sql.deleteText !== undefined && row.body !== null) await session.change(sql.deleteText, [seq]);
  await session.change(sql.upsertText, [seq, tenant, row.status, latest, text]);
  return undefined;
}

/**
 * MySQL. Bindings: tenant, id, body, text revision, per text. Writes versions'
 * full-text texts after their writes committed (search-text.ts), with each
 * version's row as it is then, except where the row holds the text of a later
 * revision already: the texts of two writes of one version may arrive in
 * either order, and the later revision's stays. In ON DUPLICATE KEY UPDATE the
 * assignments run left to right, so `body` compares with the revision the row
 * held before.
 */
export function keepTextsStatement(texts: number): string {
  const rows = Array.from({ length: texts }, (_, i) =>
    i === 0 ? "SELECT ? AS tenant, ? AS id, ? AS body, ? AS revision" : "SELECT ?, ?, ?, ?",
  ).join(" UNION ALL ");
  return (
    "INSERT INTO definition_text (seq, tenant, status, is_latest, body, text_revision) " +
    `SELECT d.seq, d.tenant, d.status, d.is_latest, v.body, v.revision FROM (${rows}) v ` +
    "JOIN agent_definitions d ON d.tenant = v.tenant AND d.id = v.id " +
    "ON DUPLICATE KEY UPDATE body = IF(VALUES(text_revision) > definition_text.text_revision, VALUES(body), " +
    "definition_text.body), text_revision = GREATEST(definition_text.text_revision, VALUES(text_revision))"
  );
}
