/**
 * Migration 0011 on a database seeded as 0010 left it: on MySQL every
 * definition gets the byte count of its JSON in a generated column, which
 * goes again when it is undone; on SQLite it changes nothing (octet_length
 * reads the size from the record's header).
 */
import { toJsonString } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../../gen/asor/v1/agent_definition_pb.js";
import { openDatabase } from "../../../src/storage/run/connection.js";
import { forEachDatabase, useFreshDatabase } from "../../support/databases.js";
import { definition, newId, withIds } from "../fixtures.js";
import { migrateDown, migrateToJustBefore, migrateUp, type SeededDefinition, seedDefinitionsAt0008 } from "./steps.js";

const migration = "0011-add-document-bytes";

const seeded: SeededDefinition[] = Array.from({ length: 5 }, (_, i) => ({
  seq: i + 1,
  tenant: "default",
  // Multi-byte characters: bytes, not characters, are counted.
  def: withIds(
    definition({ name: `Agent ${i + 1}`, description: "Ünïcødé 🤖".repeat(i * 40) }),
    newId(),
    `Agent_ID=AGENT-${i + 1}`,
  ),
}));

forEachDatabase((db) => {
  const older = useFreshDatabase(db);

  describe(`migration ${migration}`, () => {
    it(
      "sizes the JSON of the definitions stored before it " +
        "(MySQL's column; nothing on SQLite), and drops the column again",
      async () => {
        const direct = await openDatabase(older());
        try {
          await migrateToJustBefore(direct.db, migration);
          await seedDefinitionsAt0008(direct.db, seeded);
          const columns = Object.keys(await direct.db("agent_definitions").columnInfo()).sort();

          await migrateUp(direct.db, migration);
          if (direct.dialect === "mysql") {
            const sized = (await direct
              .db("agent_definitions")
              .select("id", "document_bytes")
              .orderBy("seq")) as Array<{
              id: string;
              document_bytes: number | string;
            }>;
            expect(sized.map((row) => [row.id, Number(row.document_bytes)])).toEqual(
              seeded.map(({ def }) => [def.id, Buffer.byteLength(toJsonString(AgentDefinitionSchema, def))]),
            );
          } else {
            expect(Object.keys(await direct.db("agent_definitions").columnInfo()).sort()).toEqual(columns);
          }

          await migrateDown(direct.db, migration);
          expect(Object.keys(await direct.db("agent_definitions").columnInfo()).sort()).toEqual(columns);
        } finally {
          await direct.db.destroy();
        }
      },
    );
  });
});
