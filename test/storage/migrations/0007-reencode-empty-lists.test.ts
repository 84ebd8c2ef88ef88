/**
 * Migration 0007 on a database seeded as 0006 left it: the JSON of every
 * definition is written again from its binary with every list member shown
 * (empty as `[]`), the binary untouched; undone, the JSON is protobuf-es's
 * `toJsonString` again.
 */
import { create, equals, fromJsonString, toBinary, toJsonString } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import {
  type AgentDefinition,
  AgentDefinitionSchema,
  SkillResourceSchema,
} from "../../../gen/asor/v1/agent_definition_pb.js";
import { openDatabase } from "../../../src/storage/run/connection.js";
import { createSqlRepository } from "../../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../../support/databases.js";
import { bytes, definition, newId, withIds } from "../fixtures.js";
import { migrateDown, migrateToJustBefore, migrateUp, rowsAt0005 } from "./steps.js";

const tenant = "default";
const migration = "0007-reencode-empty-lists";

/** A document column as text: LONGBLOB (a Buffer) on MySQL, TEXT on SQLite. */
const text = (document: string | Uint8Array): string =>
  typeof document === "string" ? document : new TextDecoder().decode(document);

/** The smallest definition, and its JSON as 0007 writes it: the frozen encoding, byte for byte. */
const tiny = create(AgentDefinitionSchema, {
  id: "0123456789abcdef0123456789abcdef",
  referenceId: "Agent_ID=AGENT-1",
  name: "Tiny",
  description: "d",
  version: "1",
  provider: { id: "Provider=Acme" },
  skills: [{ id: "s", name: "S", description: "d" }],
});
const tinyAfter0007 =
  '{"id":"0123456789abcdef0123456789abcdef","name":"Tiny","description":"d","version":"1",' +
  '"provider":{"id":"Provider=Acme"},' +
  '"skills":[{"id":"s","name":"S","description":"d","tags":[],"inputModes":[],"outputModes":[]}],' +
  '"defaultInputModes":[],"defaultOutputModes":[],"hostConfig":[],"reference_id":"Agent_ID=AGENT-1"}';

forEachDatabase((db) => {
  const older = useFreshDatabase(db);

  describe(`migration ${migration}`, () => {
    it(
      "shows every list member of the rows written before it, " +
        "empty as [], their binary and content unchanged; and back",
      async () => {
        // More rows than one batch, so the batches must follow each other.
        const rows = 1_050;
        const written = new Map<string, { def: AgentDefinition; document: string; binary: Uint8Array }>();
        const direct = await openDatabase(older());
        try {
          await migrateToJustBefore(direct.db, migration);
          // The rows as 0006's version wrote them: protobuf JSON without its empty lists.
          const now = "2024-01-02 03:04:05.678";
          const agents = [];
          const definitions = [];
          for (let n = 1; n <= rows; n++) {
            const referenceId = `Agent_ID=AGENT-${n}`;
            const def =
              n === 1
                ? tiny
                : withIds(
                    definition({ name: `Old ${n}`, description: n % 2 === 0 ? "Ünïcødé 🤖" : "old" }),
                    newId(),
                    referenceId,
                  );
            if (n % 3 === 0) {
              const mode = { id: "Mode=Delegate" };
              def.hostConfig = [
                create(SkillResourceSchema, {
                  skillId: "file",
                  executionMode: mode,
                  hostResources: [{ toolName: "tool", description: "d" }],
                }),
              ];
            }
            const binary = toBinary(AgentDefinitionSchema, def);
            const document = toJsonString(AgentDefinitionSchema, def);
            written.set(def.id, { def, document, binary });
            const { agent, definition: row } = rowsAt0005(n, tenant, def, document, now);
            agents.push(agent);
            definitions.push({ ...row, document_binary: Buffer.from(binary) });
          }
          await direct.db.batchInsert("agents", agents, 200);
          await direct.db.batchInsert("agent_definitions", definitions, 200);
          await direct
            .db("tenants")
            .where({ name: tenant })
            .update({ next_agent_number: rows + 1 });

          await migrateUp(direct.db, migration);
          const stored = async () =>
            (await direct.db("agent_definitions").select("id", "document", "document_binary")) as Array<{
              id: string;
              document: string | Uint8Array;
              document_binary: Uint8Array;
            }>;
          const migrated = await stored();
          expect(migrated).toHaveLength(rows);
          for (const row of migrated) {
            const { def, binary } = written.get(row.id)!;
            const json = JSON.parse(text(row.document));
            expect(json.defaultInputModes, row.id).toEqual([]);
            expect(json.defaultOutputModes).toEqual([]);
            expect(json.skills[0].tags).toEqual([]);
            expect(json.skills[0].inputModes).toEqual([]);
            // By what was written, not by what came back: a hostConfig the migration lost must fail here.
            if (def.hostConfig.length > 0) expect(json.hostConfig[0].hostResources[0].tools).toEqual([]);
            else expect(json.hostConfig).toEqual([]);
            expect(equals(AgentDefinitionSchema, fromJsonString(AgentDefinitionSchema, text(row.document)), def)).toBe(
              true,
            );
            expect(bytes(row.document_binary)).toEqual(bytes(binary));
          }
          expect(text(migrated.find((row) => row.id === tiny.id)!.document)).toBe(tinyAfter0007);

          await migrateDown(direct.db, migration);
          const undone = await stored();
          expect(undone.map((row) => [row.id, text(row.document)])).toEqual(
            undone.map((row) => [row.id, written.get(row.id)?.document]),
          );
          expect(undone.every((row) => bytes(row.document_binary).equals(bytes(written.get(row.id)!.binary)))).toBe(
            true,
          );
        } finally {
          await direct.db.destroy();
        }

        // Up again, and on to the latest: the repository answers the re-encoded JSON.
        const repo = await createSqlRepository(older());
        try {
          expect(new TextDecoder().decode((await repo.get(tenant, tiny.id))?.json)).toBe(tinyAfter0007);
        } finally {
          await repo.close();
        }
      },
    );
  });
});
