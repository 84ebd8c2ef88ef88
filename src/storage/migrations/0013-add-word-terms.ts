/**
 * The words of the searchable text as terms (issue 24): `q` pages by
 * definition_terms' index range and counts by definition_term_counts, as a
 * `tag` filter does, instead of reading the databases' full-text indexes.
 * Each definition gets a row of kind 10 per distinct word of its name,
 * description, overview, skills (names, descriptions, tags) and host
 * resources' tool names, case- and accent-folded (frozen/0013-word-terms.ts).
 * 0010's triggers on definition_terms count them as they go in.
 *
 * No schema change: the rows are written for the definitions stored before
 * it, in batches in seq order, from their stored JSON. A run that died
 * halfway left some of them; run again, the rows there already are left as
 * they are and the rest written (README.md, "Run again"). Undone, the word
 * terms and their counters go.
 */
import { fromJsonString } from "@bufbuild/protobuf";
import type { Knex } from "knex";
import { AgentDefinitionSchema } from "../../../gen/asor/v1/agent_definition_pb.js";
import { dialectOf } from "./dialect.js";
import { insertWordTerms } from "./frozen/0013-word-terms.js";
import type { Migration } from "./index.js";

const wordKind = 10;
/** Rows decoded per batch. */
const backfillBatch = 500;

export const addWordTerms: Migration = {
  name: "0013-add-word-terms",
  async up(db) {
    await backfill(db);
  },
  async down(db) {
    await db("definition_terms").where({ kind: wordKind }).delete();
    await db("definition_term_counts").where({ kind: wordKind }).delete();
  },
};

const utf8 = new TextDecoder("utf-8", { fatal: true });

async function backfill(db: Knex): Promise<void> {
  const dialect = dialectOf(db);
  for (let after: number | string = 0; ; ) {
    const rows = (await db("agent_definitions")
      .select(["seq", "tenant", "status", "is_latest", "document"])
      .where("seq", ">", after)
      .orderBy("seq", "asc")
      .limit(backfillBatch)) as Array<{
      seq: number | string;
      tenant: string;
      status: string;
      is_latest: number | boolean;
      document: string | Uint8Array;
    }>;
    if (rows.length === 0) return;
    const unworded = rows.map((row) => ({
      seq: row.seq,
      tenant: row.tenant,
      status: row.status,
      latest: Boolean(row.is_latest),
      // Frozen: the JSON options of 0009's backfill; fields a later schema dropped are ignored.
      definition: fromJsonString(
        AgentDefinitionSchema,
        typeof row.document === "string" ? row.document : utf8.decode(row.document),
        { ignoreUnknownFields: true },
      ),
    }));
    await insertWordTerms(dialect, (sql, bindings) => db.raw(sql, bindings), unworded);
    after = rows[rows.length - 1]!.seq;
  }
}
