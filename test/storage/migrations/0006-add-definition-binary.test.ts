/**
 * Migration 0006 on a database seeded as 0005 left it: every definition gets
 * the protobuf binary of the message its JSON holds, its JSON untouched; undone,
 * the column is gone and the JSON is as written.
 */
import { equals, fromJsonString, toBinary, toJsonString } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../../gen/asor/v1/agent_definition_pb.js";
import { unfilteredQuery } from "../../../src/domain/list-query.js";
import { openDatabase } from "../../../src/storage/run/connection.js";
import { createSqlRepository } from "../../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../../support/databases.js";
import { bytes, definition, fromJsonBytes, newId, save, withIds } from "../fixtures.js";
import { migrateDown, migrateToJustBefore, migrateUp, rowsAt0005 } from "./steps.js";

const tenant = "default";
const migration = "0006-add-definition-binary";

/** A document column as text: LONGBLOB (a Buffer) on MySQL from 0006 on, TEXT on SQLite. */
const text = (document: string | Uint8Array): string =>
  typeof document === "string" ? document : new TextDecoder().decode(document);

forEachDatabase((db) => {
  const older = useFreshDatabase(db);

  describe(`migration ${migration}`, () => {
    it("gives rows written before it the binary of the message their JSON holds, and takes it away again", async () => {
      // More rows than one backfill batch (500), so the batches must follow each other.
      const rows = 1_050;
      const written = new Map<string, { document: string; binary: Uint8Array }>();
      const direct = await openDatabase(older());
      try {
        await migrateToJustBefore(direct.db, migration);
        expect(await direct.db.schema.hasColumn("agent_definitions", "document_binary")).toBe(false);
        // The rows as 0005's version wrote them: the JSON document alone.
        const now = "2024-01-02 03:04:05.678";
        const agents = [];
        const definitions = [];
        for (let n = 1; n <= rows; n++) {
          const referenceId = `Agent_ID=AGENT-${n}`;
          const def = withIds(
            definition({
              name: `Old ${n}`,
              description: n % 2 === 0 ? "Ünïcødé 🤖" : "old",
              externalAgentId: `ext-${n}`,
            }),
            newId(),
            referenceId,
          );
          let document = toJsonString(AgentDefinitionSchema, def);
          // A field a later schema dropped: ignored, not a failed migration.
          if (n === 7) document = `${document.slice(0, -1)},"droppedField":"x"}`;
          written.set(def.id, { document, binary: toBinary(AgentDefinitionSchema, def) });
          const { agent, definition: row } = rowsAt0005(n, tenant, def, document, now);
          agents.push(agent);
          definitions.push(row);
        }
        await direct.db.batchInsert("agents", agents, 200);
        await direct.db.batchInsert("agent_definitions", definitions, 200);
        await direct
          .db("tenants")
          .where({ name: tenant })
          .update({ next_agent_number: rows + 1 });

        await migrateUp(direct.db, migration);
        const migrated = (await direct.db("agent_definitions").select("id", "document", "document_binary")) as Array<{
          id: string;
          document: string | Uint8Array;
          document_binary: Uint8Array;
        }>;
        expect(migrated).toHaveLength(rows);
        for (const row of migrated) {
          expect(text(row.document), row.id).toBe(written.get(row.id)?.document);
          expect(bytes(row.document_binary), row.id).toEqual(bytes(written.get(row.id)!.binary));
        }

        await migrateDown(direct.db, migration);
        expect(await direct.db.schema.hasColumn("agent_definitions", "document_binary")).toBe(false);
        if (direct.dialect === "mysql") {
          const [[column]] = (await direct.db.raw(
            "SELECT DATA_TYPE AS type FROM information_schema.COLUMNS " +
              "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'agent_definitions' AND COLUMN_NAME = 'document'",
          )) as [Array<{ type: string }>];
          expect(column?.type).toBe("longtext");
        }
        const undone = (await direct.db("agent_definitions").select("id", "document")) as Array<{
          id: string;
          document: string;
        }>;
        expect(undone.map((row) => [row.id, text(row.document)])).toEqual(
          undone.map((row) => [row.id, written.get(row.id)?.document]),
        );
      } finally {
        await direct.db.destroy();
      }

      // Up again, and on to the latest: the repository reads them and writes on from there.
      const repo = await createSqlRepository(older());
      try {
        expect((await repo.search(tenant, unfilteredQuery(10, 0))).total).toBe(rows);
        for (const id of [...written.keys()].filter((_, i) => i % 97 === 0 || i === 6 || i >= rows - 3)) {
          const got = await repo.get(tenant, id);
          const sent = fromJsonString(AgentDefinitionSchema, written.get(id)!.document, { ignoreUnknownFields: true });
          expect(equals(AgentDefinitionSchema, fromJsonBytes(got!), sent), id).toBe(true);
          expect(bytes(got!.binary)).toEqual(bytes(written.get(id)!.binary));
        }
        const next = await save(repo, definition({ name: "New after 0006" }));
        expect(next.stored.agent).toEqual({ number: rows + 1, referenceId: `Agent_ID=AGENT-${rows + 1}` });
      } finally {
        await repo.close();
      }
    });
  });
});
