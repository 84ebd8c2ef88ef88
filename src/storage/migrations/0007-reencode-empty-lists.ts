/**
 * REST answers show every list member of the contract, empty as `[]`, so a
 * client that POSTs `"tags": []` reads it back (rows.ts, `encodeDefinition`).
 * Answers are the stored JSON bytes, so the rows written before that left
 * their empty lists out: this migration writes their JSON again, from their
 * binary (the same message; the binary itself does not change, protobuf
 * binary has no empty lists), with a frozen copy of the writes' function as
 * it was when this shipped (`documentOf`, below), so an old row answers as a
 * new one did then.
 *
 * Data only, no DDL: on MySQL each batch is its own statement, and a run
 * that stopped halfway is simply run again (a row already re-encoded is
 * skipped). `down` writes the JSON back without its empty lists, as
 * protobuf-es's `toJsonString` writes it.
 */
import {
  type DescMessage,
  fromBinary,
  type JsonObject,
  type JsonValue,
  toJson,
  toJsonString,
} from "@bufbuild/protobuf";
import type { Knex } from "knex";
import { type AgentDefinition, AgentDefinitionSchema } from "../../../gen/asor/v1/agent_definition_pb.js";
import type { Migration } from "./index.js";

const table = "agent_definitions";

/** Rows read and rewritten per batch: a few MB of documents at a time, however large the table is. */
const batchRows = 500;

export const reencodeEmptyLists: Migration = {
  name: "0007-reencode-empty-lists",
  async up(db) {
    await rewriteDocuments(db, (binary) => documentOf(fromBinary(AgentDefinitionSchema, binary)));
  },
  async down(db) {
    await rewriteDocuments(db, (binary) =>
      toJsonString(AgentDefinitionSchema, fromBinary(AgentDefinitionSchema, binary)),
    );
  },
};

const utf8 = new TextDecoder("utf-8", { fatal: true });

/*
 * Frozen: a copy of rows.ts's `encodeDefinition(...).document` and
 * `toJsonWithEmptyLists` as they were when this migration shipped (issue 12;
 * copied here in issue 23). Never change them: a new encoding of stored rows
 * is a new migration. They walk the generated schema's fields (gen/, see
 * README.md), so a list field added to the contract later shows as `[]` in
 * the rows this rewrites, as it does in the writes' JSON.
 */

/** The protobuf JSON of a definition, every list member shown (empty as `[]`), without the registry's `meta`. */
function documentOf(sent: AgentDefinition): string {
  const definition: AgentDefinition = sent.meta === undefined ? sent : { ...sent, meta: undefined };
  return JSON.stringify(withEmptyLists(AgentDefinitionSchema, toJson(AgentDefinitionSchema, definition) as JsonObject));
}

/**
 * Protobuf JSON (members in field number order) plus every list member it
 * leaves out because it is empty, as `[]`, in the messages at every depth.
 * Scalars keep protobuf JSON's presence rules.
 */
function withEmptyLists(desc: DescMessage, json: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const field of [...desc.fields].sort((a, b) => a.number - b.number)) {
    const value = json[field.jsonName];
    if (field.fieldKind === "list") {
      const items = (value ?? []) as JsonValue[];
      out[field.jsonName] =
        field.listKind === "message" && hasFieldsInJson(field.message)
          ? items.map((item) => withEmptyLists(field.message, item as JsonObject))
          : items;
    } else if (value === undefined) {
    } else if (field.fieldKind === "message" && hasFieldsInJson(field.message)) {
      out[field.jsonName] = withEmptyLists(field.message, value as JsonObject);
    } else {
      // Scalars, enums and maps as protobuf JSON wrote them (the contract has no maps of messages).
      out[field.jsonName] = value;
    }
  }
  return out;
}

/** Whether a message's JSON is an object of its fields: not so for the well-known types (Timestamp, Struct...). */
function hasFieldsInJson(desc: DescMessage): boolean {
  return !desc.typeName.startsWith("google.protobuf.");
}

/** Gives every row the JSON `encode` makes of its binary, in batches in insertion order (by the unique seq index). */
async function rewriteDocuments(db: Knex, encode: (binary: Uint8Array) => string): Promise<void> {
  for (let after: number | string = 0; ; ) {
    const rows = (await db(table)
      .select(["id", "seq", "document", "document_binary"])
      .where("seq", ">", after)
      .orderBy("seq", "asc")
      .limit(batchRows)) as Array<{
      id: string;
      seq: number | string;
      /** A Buffer from the LONGBLOB on MySQL, text on SQLite. */
      document: string | Uint8Array;
      document_binary: Uint8Array;
    }>;
    if (rows.length === 0) return;
    const changed = rows
      .map((row) => ({
        id: row.id,
        old: typeof row.document === "string" ? row.document : utf8.decode(row.document),
        document: encode(row.document_binary),
      }))
      .filter((row) => row.document !== row.old);
    if (changed.length > 0) {
      // One UPDATE per batch (0006 measured a statement per row at 2.5 times the time). The JSON is
      // bound as a string: MySQL stores its UTF-8 in the LONGBLOB, SQLite keeps TEXT, as inserts do.
      const cases = changed.map(() => "WHEN ? THEN ?").join(" ");
      const ids = changed.map(() => "?").join(", ");
      await db.raw(`UPDATE ${table} SET document = CASE id ${cases} END WHERE id IN (${ids})`, [
        ...changed.flatMap((row) => [row.id, row.document]),
        ...changed.map((row) => row.id),
      ]);
    }
    after = rows[rows.length - 1]!.seq;
  }
}
