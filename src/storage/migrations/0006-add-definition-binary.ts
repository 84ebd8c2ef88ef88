/**
 * Each definition is also kept in protobuf binary, beside its protobuf JSON,
 * and both are read as bytes, so that a read answers either encoding as
 * stored instead of parsing the document and writing it out again on every
 * request (reads are cheap by design: docs/architecture.md). Writes make both with
 * rows.ts's `encodeDefinition`; this migration makes the binary of the rows
 * written before it, from their JSON, once, with its own frozen copy of the
 * part of that function it needs (`binaryOf`, below). The JSON itself is not
 * touched: it reads back byte for byte as it was written.
 *
 * On MySQL the JSON column becomes LONGBLOB too: mysql2 answers text columns
 * as JS strings, which a read would decode only to encode them again for the
 * answer, and BLOBs as Buffers. Measured on MariaDB 10.11 (100,000
 * definitions, 20-row pages, 10 concurrent readers): LONGTEXT read as a string
 * and encoded, about 3,900 pages/s and 200 µs of client CPU per page;
 * `CAST(document AS BINARY)`, 3,800-4,400 and 135-175 µs, plus 50 µs of
 * server time per page for the cast; LONGBLOB, 4,100-5,400 and 120-170 µs.
 * The rows are rewritten for the backfill anyway, so the type change costs
 * one table copy in the same ALTER. The server no longer checks that the JSON
 * is UTF-8 (toJsonString writes nothing else), and SQL that reads it as text
 * must say so, `CONVERT(document USING utf8mb4)`: JSON_LENGTH works on the
 * bytes, JSON_VALUE of a non-ASCII string does not. SQLite keeps TEXT and
 * reads it `CAST(... AS BLOB)`, which costs the same there as a BLOB column
 * (a type change would mean copying the table by hand: SQLite cannot alter a
 * column).
 *
 * A process of an earlier version must not write once this has run: its
 * inserts fail (MySQL; the new column has no default), and its updates would
 * leave the binary of the previous content behind.
 */
import { Buffer } from "node:buffer";
import { fromJsonString, toBinary } from "@bufbuild/protobuf";
import type { Knex } from "knex";
import { AgentDefinitionSchema } from "../../../gen/asor/v1/agent_definition_pb.js";
import { dialectOf } from "./dialect.js";
import type { Migration } from "./index.js";

const table = "agent_definitions";
const column = "document_binary";

/** Rows read and rewritten per batch: a few MB of documents at a time, however large the table is. */
const backfillBatch = 500;

export const addDefinitionBinary: Migration = {
  name: "0006-add-definition-binary",
  async up(db) {
    // MySQL commits DDL on its own, so a backfill that failed after it leaves the column
    // behind without recording the migration; running it again then only backfills.
    if (!(await db.schema.hasColumn(table, column))) await addColumn(db);
    await backfill(db);
  },
  async down(db) {
    if (dialectOf(db) === "mysql") {
      // Back to 0005's JSON column; every row holds the UTF-8 that toJsonString wrote.
      await db.raw(`
        ALTER TABLE ${table}
          DROP COLUMN ${column},
          MODIFY document LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL
            COMMENT 'The definition as protobuf JSON (asor.v1.AgentDefinition), id and reference_id included.'
      `);
    } else {
      // SQLite drops columns since 3.35 (better-sqlite3 bundles a newer one); knex's dropColumn
      // would copy the whole table instead.
      await db.raw(`ALTER TABLE ${table} DROP COLUMN ${column}`);
    }
  },
};

async function addColumn(db: Knex): Promise<void> {
  if (dialectOf(db) === "mysql") {
    // One statement, so one table copy and all or nothing. NOT NULL without a default:
    // existing rows hold an empty value until the backfill below, and an insert that
    // leaves the column out fails instead of storing a row without it. LONGBLOB like
    // the JSON: no size the JSON could have that the binary cannot.
    await db.raw(`
      ALTER TABLE ${table}
        MODIFY document LONGBLOB NOT NULL
          COMMENT 'The definition as protobuf JSON (asor.v1.AgentDefinition), UTF-8, id and reference_id included; bytes so reads get them as they are.',
        ADD COLUMN ${column} LONGBLOB NOT NULL
          COMMENT 'The same definition as protobuf binary; written with document, never apart.'
    `);
  } else {
    // SQLite adds a NOT NULL column only with a default; every insert writes it anyway.
    await db.raw(`ALTER TABLE ${table} ADD COLUMN ${column} BLOB NOT NULL DEFAULT x''`);
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * The protobuf binary of a stored JSON document. Frozen: a copy of what
 * rows.ts's `fromDocument` and `encodeDefinition(...).binary` did when this
 * was frozen (issue 23); never change it, write a new migration instead. Fields
 * a later schema dropped are ignored rather than failing old rows; `meta` is
 * the registry's, kept in columns, and never stored.
 */
function binaryOf(document: string): Uint8Array {
  const definition = fromJsonString(AgentDefinitionSchema, document, { ignoreUnknownFields: true });
  return toBinary(
    AgentDefinitionSchema,
    definition.meta === undefined ? definition : { ...definition, meta: undefined },
  );
}

/** Bytes as a Buffer, without a copy: the drivers bind Buffers as bytes, not other Uint8Arrays. */
function bytes(of: Uint8Array): Buffer {
  return Buffer.from(of.buffer, of.byteOffset, of.byteLength);
}

/** Gives every row the binary of its JSON, in batches in insertion order (by the unique seq index). */
async function backfill(db: Knex): Promise<void> {
  for (let after: number | string = 0; ; ) {
    const rows = (await db(table)
      .select(["id", "seq", "document"])
      .where("seq", ">", after)
      .orderBy("seq", "asc")
      .limit(backfillBatch)) as Array<{
      id: string;
      seq: number | string;
      /** A Buffer from the LONGBLOB on MySQL, text on SQLite. */
      document: string | Uint8Array;
    }>;
    if (rows.length === 0) return;
    // The JSON stays as it was written; only its binary twin is made.
    const binaries = rows.map((row) =>
      bytes(binaryOf(typeof row.document === "string" ? row.document : utf8.decode(row.document))),
    );
    // One UPDATE per batch: an UPDATE per row (a round trip each) took 62 s for 100,000 rows on
    // MariaDB, a batch at a time 24 s (the whole migration 26 s; SQLite 12 s).
    const cases = rows.map(() => "WHEN ? THEN ?").join(" ");
    const ids = rows.map(() => "?").join(", ");
    await db.raw(`UPDATE ${table} SET ${column} = CASE id ${cases} END WHERE id IN (${ids})`, [
      ...rows.flatMap((row, i) => [row.id, binaries[i]!]),
      ...rows.map((row) => row.id),
    ]);
    after = rows[rows.length - 1]!.seq;
  }
}
