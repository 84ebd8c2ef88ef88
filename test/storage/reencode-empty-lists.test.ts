import { create, equals, fromJsonString, toBinary, toJsonString } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { type AgentDefinition, AgentDefinitionSchema, SkillResourceSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { openDatabase } from "../../src/storage/connection.js";
import { createKnexRepository } from "../../src/storage/knex-repository.js";
import { migrationSource, migrations } from "../../src/storage/migrations/index.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { bytes, definition, newId, withIds } from "./fixtures.js";

const tenant = "default";

forEachDatabase((db) => {
  const older = useFreshDatabase(db);

  describe("rows written before empty lists were stored", () => {
    it("answer every list member, empty as [], once migrated; their binary and content unchanged", async () => {
      // More rows than one batch, so the batches must follow each other.
      const rows = 1_050;
      const written = new Map<string, { def: AgentDefinition; binary: Uint8Array }>();
      const direct = await openDatabase(older());
      try {
        const upTo0006 = { ...migrationSource, getMigrations: async () => migrations.slice(0, migrations.findIndex((m) => m.name.startsWith("0006-")) + 1) };
        await direct.db.migrate.latest({ migrationSource: upTo0006, tableName: "knex_migrations" });
        // The rows as the previous version wrote them: protobuf JSON without its empty lists.
        const now = "2024-01-02 03:04:05.678";
        const agents = [];
        const definitions = [];
        for (let n = 1; n <= rows; n++) {
          const referenceId = `Agent_ID=AGENT-${n}`;
          const def = withIds(definition({ name: `Old ${n}`, description: n % 2 === 0 ? "Ünïcødé 🤖" : "old" }), newId(), referenceId);
          if (n % 3 === 0) def.hostConfig = [create(SkillResourceSchema, { skillId: "file", executionMode: { id: "Mode=Delegate" }, hostResources: [{ toolName: "tool", description: "d" }] })];
          const binary = toBinary(AgentDefinitionSchema, def);
          written.set(def.id, { def, binary });
          agents.push({ tenant, number: n, reference_id: referenceId, provider_id: "Provider=Acme", name: def.name, created_at: now });
          definitions.push({
            id: def.id,
            seq: n,
            tenant,
            name: def.name,
            provider_id: "Provider=Acme",
            version: def.version,
            agent_number: n,
            document: toJsonString(AgentDefinitionSchema, def),
            document_binary: Buffer.from(binary),
            created_at: now,
            updated_at: now,
          });
        }
        await direct.db.batchInsert("agents", agents, 200);
        await direct.db.batchInsert("agent_definitions", definitions, 200);
        await direct
          .db("tenants")
          .where({ name: tenant })
          .update({ next_agent_number: rows + 1 });
      } finally {
        await direct.db.destroy();
      }

      const migrated = await createKnexRepository(older());
      try {
        for (const id of [...written.keys()].filter((_, i) => i % 97 === 0 || i >= rows - 3)) {
          const got = await migrated.get(tenant, id);
          const json = JSON.parse(new TextDecoder().decode(got!.json));
          expect(json.defaultInputModes, id).toEqual([]);
          expect(json.defaultOutputModes).toEqual([]);
          expect(json.skills[0].tags).toEqual([]);
          expect(json.skills[0].inputModes).toEqual([]);
          const { def, binary } = written.get(id)!;
          // By what was written, not by what came back: a hostConfig the migration lost must fail here.
          if (def.hostConfig.length > 0) expect(json.hostConfig[0].hostResources[0].tools).toEqual([]);
          else expect(json.hostConfig).toEqual([]);
          expect(equals(AgentDefinitionSchema, fromJsonString(AgentDefinitionSchema, new TextDecoder().decode(got!.json)), def)).toBe(true);
          expect(bytes(got!.binary)).toEqual(bytes(binary));
        }
      } finally {
        await migrated.close();
      }
    });
  });
});
