/**
 * REST answers show every list member of the contract, empty as `[]`, so a
 * client that POSTs `"tags": []` reads it back (rows.ts, `encodeDefinition`).
 * Answers are the stored JSON bytes, so the rows written before that left
 * their empty lists out: this migration writes their JSON again, from their
 * binary (the same message; the binary itself does not change, protobuf
 * binary has no empty lists), with the writes' own function, so an old row
 * answers as a new one would.
 *
 * Data only, no DDL: on MySQL each batch is its own statement, and a run
 * that stopped halfway is simply run again (a row already re-encoded is
 * skipped). `down` writes the JSON back without its empty lists, as
 * protobuf-es's `toJsonString` writes it.
 */
import { fromBinary, toJsonString } from "@bufbuild/protobuf";
import type { Knex } from "knex";
import { AgentDefinitionSchema } from "../../../gen/asor/v1/agent_definition_pb.js";
import { encodeDefinition } from "../rows.js";
import type { Migration } from "./index.js";

const table = "agent_definitions";

/** Rows read and rewritten per batch: a few MB of documents at a time, however large the table is. */
const batchRows = 500;

export const reencodeEmptyLists: Migration = {
  name: "0007-reencode-empty-lists",
  async up(db) {
    await rewriteDocuments(db, (binary) => encodeDefinition(fromBinary(AgentDefinitionSchema, binary)).document);
  },
  async down(db) {
    await rewriteDocuments(db, (binary) => toJsonString(AgentDefinitionSchema, fromBinary(AgentDefinitionSchema, binary)));
  },
};

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Gives every row the JSON `encode` makes of its binary, in batches in insertion order (by the unique seq index). */
async function rewriteDocuments(db: Knex, encode: (binary: Uint8Array) => string): Promise<void> {
  for (let after: number | string = 0; ; ) {
    const rows = (await db(table).select(["id", "seq", "document", "document_binary"]).where("seq", ">", after).orderBy("seq", "asc").limit(batchRows)) as Array<{
      id: string;
      seq: number | string;
      /** A Buffer from the LONGBLOB on MySQL, text on SQLite. */
      document: string | Uint8Array;
      document_binary: Uint8Array;
    }>;
    if (rows.length === 0) return;
    const changed = rows
      .map((row) => ({ id: row.id, old: typeof row.document === "string" ? row.document : utf8.decode(row.document), document: encode(row.document_binary) }))
      .filter((row) => row.document !== row.old);
    if (changed.length > 0) {
      // One UPDATE per batch (0006 measured a statement per row at 2.5 times the time). The JSON is
      // bound as a string: MySQL stores its UTF-8 in the LONGBLOB, SQLite keeps TEXT, as inserts do.
      const cases = changed.map(() => "WHEN ? THEN ?").join(" ");
      const ids = changed.map(() => "?").join(", ");
      await db.raw(`UPDATE ${table} SET document = CASE id ${cases} END WHERE id IN (${ids})`, [...changed.flatMap((row) => [row.id, row.document]), ...changed.map((row) => row.id)]);
    }
    after = rows[rows.length - 1]!.seq;
  }
}
