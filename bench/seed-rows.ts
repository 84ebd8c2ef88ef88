/**
 * The rows of one seeding batch (seed.ts): `n` new agents numbered from
 * `first`, each with its one definition, as the service writes a new agent: a
 * random 32-hex id, both encodings the service stores (`withDerivedFields`,
 * then the storage's own `encodeDefinition`) and the side rows of its search
 * index (the storage's own `sideRowsOf`: searchTermsOf and searchTextOf).
 * Pure CPU, made in worker threads (seed-worker.ts) while the database
 * writes the batch before, down to the statements: on MySQL their text with
 * the values written in by mysql2's own `format` (what the driver does to a
 * query's values), ~6 MB a batch, which took the loading thread ~0.7 ms per
 * definition; on SQLite statements and their bindings.
 */
import { randomBytes } from "node:crypto";
import { clone, create, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { format } from "mysql2";
import { AgentDefinitionSchema, SkillTagSchema } from "../gen/asor/v1/agent_definition_pb.js";
import { withDerivedFields } from "../src/domain/derived-fields.js";
import { sideRowsOf, type Unindexed, writeSideRows } from "../src/storage/queries/search-index.js";
import { agentReferenceId, encodeDefinition } from "../src/storage/rows.js";
import type { Dialect } from "../src/storage/run/connection.js";
import type { WriteBinding } from "../src/storage/run/writes.js";
import { BENCH_PROVIDER, BENCH_VERSION, benchDefinition } from "./definition.js";

/**
 * One seeded definition in a hundred (agent numbers divisible by 100) has this extra skill tag and
 * this word in its description: what the search scenarios' `tag` and `q` find, about 1 % of the tenant.
 */
export const ONE_PERCENT_TAG = "one-percent";
export const ONE_PERCENT_WORD = "quasar";
/**
 * A second word on the same 1 % (issue 24): `q=quasar nebula` matches exactly the definitions `q=quasar`
 * does, so the two-word scenario's AND keeps 1 % (the words are not independent: an independent second
 * 1 % would leave 0.01 %).
 */
export const ONE_PERCENT_SECOND_WORD = "nebula";

/**
 * `n` random ids as the service makes them (32 hex digits from 16 random bytes), sorted: given to the
 * definitions in seq order, InnoDB appends them to agent_definitions' clustered index (PRIMARY KEY (id))
 * instead of writing each into a random page of a table far larger than its buffer pool. The ids are as
 * random as the service's; only their order follows seq's, and the table's pages end full rather than
 * split. Throws on a repeated id (as likely as two of the service's colliding).
 */
export function sortedIds(n: number): string[] {
  const bytes = randomBytes(16 * n);
  const ids = Array.from({ length: n }, (_, i) => bytes.toString("hex", 16 * i, 16 * i + 16)).sort();
  for (let i = 1; i < n; i++) if (ids[i] === ids[i - 1]) throw new Error(`Two seeded ids are both ${ids[i]}.`);
  return ids;
}

/** The prefix of every seeded definition's name; updates POST these names again. */
export const SEEDED_NAME_PREFIX = "Bench Agent ";

/** What a batch is made from. */
export interface BatchSpec {
  readonly tenant: string;
  /** The tenant's agent id sequence prefix. */
  readonly prefix: string;
  /** The first agent number. */
  readonly first: number;
  readonly n: number;
  /** The seq of the first definition; the others follow one by one. */
  readonly seq: number;
  /** The definitions' ids (random 32-hex), in order: one per definition. */
  readonly ids: readonly string[];
  /** created_at and the other timestamps, as the database stores them. */
  readonly now: string;
  readonly dialect: Dialect;
}

/** One statement of a batch: on MySQL its whole text (no bindings), on SQLite with its bindings. */
export interface Statement {
  /** What it writes, for the time summary. */
  readonly what: string;
  readonly sql: string;
  readonly bindings?: WriteBinding[];
  /** MySQL's LOAD DATA LOCAL INFILE: the file's text (tab-separated rows), and how many rows it holds. */
  readonly infile?: { readonly text: string; readonly rows: number };
}

/** A batch's statements, in the order to run them. */
export interface Batch extends BatchSpec {
  readonly statements: Statement[];
  /** The middle definition: its id, and the JSON a GET of it must answer. */
  readonly sample: { readonly id: string; readonly json: JsonValue };
}

/**
 * Rows per INSERT statement on SQLite: within its 32,766 bindings (13 columns a definition). MySQL: a whole
 * batch, ~6 MB, within the default max_allowed_packet (16 MB).
 */
const sqliteRowsPerInsert = 400;

type Row = Record<string, WriteBinding>;

function statement(dialect: Dialect, what: string, sql: string, bindings: WriteBinding[]): Statement {
  return dialect === "mysql" ? { what, sql: format(sql, bindings) } : { what, sql, bindings };
}

/** Multi-row INSERTs of `rows` (all with the same columns, in the same order). */
function inserts(dialect: Dialect, table: string, rows: readonly Row[]): Statement[] {
  const columns = Object.keys(rows[0] ?? {});
  const tuple = `(${columns.map(() => "?").join(", ")})`;
  const per = dialect === "sqlite" ? sqliteRowsPerInsert : rows.length;
  const out: Statement[] = [];
  for (let at = 0; at < rows.length; at += per) {
    const chunk = rows.slice(at, at + per);
    const sql = `INSERT INTO ${table} (${columns.join(", ")}) VALUES ${chunk.map(() => tuple).join(", ")}`;
    out.push(
      statement(
        dialect,
        table,
        sql,
        chunk.flatMap((row) => columns.map((c) => row[c] as WriteBinding)),
      ),
    );
  }
  return out;
}

let base: ReturnType<typeof fromJson<typeof AgentDefinitionSchema>> | undefined;

export async function makeBatch(spec: BatchSpec): Promise<Batch> {
  base ??= fromJson(AgentDefinitionSchema, benchDefinition("") as JsonObject);
  const { tenant, prefix, first, n, seq, now } = spec;
  const agents: Row[] = [];
  const definitions: Row[] = [];
  const indexed: Unindexed[] = [];
  let sample: Batch["sample"] | undefined;
  for (let i = 0; i < n; i++) {
    const number = first + i;
    const referenceId = agentReferenceId(prefix, number);
    const name = `${SEEDED_NAME_PREFIX}${number}`;
    let input = base;
    if (number % 100 === 0) {
      input = clone(AgentDefinitionSchema, base);
      input.description = `${input.description} ${ONE_PERCENT_WORD} ${ONE_PERCENT_SECOND_WORD}`;
      input.skills[0]?.tags.push(create(SkillTagSchema, { tag: ONE_PERCENT_TAG }));
    }
    // withDerivedFields clones its input: the shared base only lends its name for the call.
    const kept = input.name;
    input.name = name;
    const id = spec.ids[i];
    if (id === undefined) throw new Error(`A seeding batch of ${n} definitions with ${spec.ids.length} ids.`);
    const definition = withDerivedFields(input, id, referenceId);
    input.name = kept;
    const { document, binary } = encodeDefinition(definition);
    // What a GET must answer: the document as the storage's own encoding wrote it.
    if (i === n >> 1) sample = { id: definition.id, json: JSON.parse(document) as JsonValue };
    indexed.push({ seq: seq + i, tenant, status: "ACTIVE", latest: true, definition });
    agents.push({ tenant, number, reference_id: referenceId, provider_id: BENCH_PROVIDER, name, created_at: now });
    definitions.push({
      id: definition.id,
      seq: seq + i,
      tenant,
      name,
      provider_id: BENCH_PROVIDER,
      version: BENCH_VERSION,
      agent_number: number,
      document,
      document_binary: binary,
      created_at: now,
      updated_at: now,
      status_changed_at: now,
      is_latest: 1,
    });
  }
  if (sample === undefined) throw new Error("A seeding batch of no definitions.");
  const statements = [
    ...inserts(spec.dialect, "agents", agents),
    ...inserts(spec.dialect, "agent_definitions", definitions),
  ];
  // The side rows by the storage's own statements (writeSideRows), kept here instead of run; on MySQL the
  // term rows of those statements go in by one LOAD DATA (termsFile).
  const terms = spec.dialect === "mysql" ? termsFile() : undefined;
  await writeSideRows(
    spec.dialect,
    async (sql, bindings) => {
      if (terms?.add(sql, bindings) !== true)
        statements.push(statement(spec.dialect, /definition_terms/.test(sql) ? "terms" : "text", sql, bindings));
    },
    sideRowsOf(indexed),
  );
  const load = terms?.statement();
  if (load !== undefined) statements.push(load);
  return { ...spec, statements, sample };
}

/** The storage's multi-row INSERT of term rows (search-index.ts), with its column list. */
const termsInsert = /^INSERT INTO definition_terms \(([^)]+)\) VALUES /;

/**
 * MySQL: the rows of the storage's term INSERTs gathered into one LOAD DATA LOCAL INFILE, in the columns
 * of those INSERTs. MariaDB spent most of the terms' time lexing and parsing the INSERTs' 58,000 value
 * tuples a batch (`perf`: MYSQLparse, the lexer, unescaping); LOAD DATA splits fields instead.
 */
function termsFile(): {
  add(sql: string, bindings: WriteBinding[]): boolean;
  statement(): Statement | undefined;
} {
  let columns: string | undefined;
  const lines: string[] = [];
  return {
    add(sql, bindings) {
      const match = termsInsert.exec(sql);
      if (match === null) return false;
      const names = match[1] as string;
      if (columns !== undefined && columns !== names) throw new Error(`Term INSERTs with other columns: ${sql}`);
      columns = names;
      const width = names.split(",").length;
      for (let at = 0; at < bindings.length; at += width)
        lines.push(
          bindings
            .slice(at, at + width)
            .map(infileField)
            .join("\t"),
        );
      return true;
    },
    statement() {
      if (columns === undefined) return undefined;
      return {
        what: "terms",
        // LOCAL: the client sends the file (seed.ts, from `infile`); the name is only the statement's.
        sql:
          "LOAD DATA LOCAL INFILE 'definition_terms.tsv' INTO TABLE definition_terms CHARACTER SET utf8mb4 " +
          `(${columns})`,
        infile: { text: `${lines.join("\n")}\n`, rows: lines.length },
      };
    },
  };
}

/** A value as a field of LOAD DATA's default format: tab-separated, backslash escapes, NULL as \N. */
function infileField(value: WriteBinding): string {
  if (value === null) return "\\N";
  if (typeof value === "number") return String(value);
  if (typeof value !== "string") throw new Error("A term row with bytes: LOAD DATA here takes text and numbers.");
  return value.replace(/[\\\t\n\r\0]/g, (c) =>
    c === "\\" ? "\\\\" : c === "\t" ? "\\t" : c === "\n" ? "\\n" : c === "\r" ? "\\r" : "\\0",
  );
}
