/**
 * Migration 0010 on a database seeded as 0009 left it: the counters per filter
 * value are made and filled from the terms there are, per tenant, status,
 * is_latest and shard, and the index it replaces is dropped; undone, the
 * counters and their triggers are gone and the index is back.
 * search.test.ts checks that the triggers keep the counters exact afterwards.
 */
import { describe, expect, it } from "vitest";
import { openDatabase } from "../../../src/storage/run/connection.js";
import { forEachDatabase, useFreshDatabase } from "../../support/databases.js";
import { definition, newId, withIds } from "../fixtures.js";
import {
  migrateDown,
  migrateToJustBefore,
  migrateUp,
  rows,
  type SeededDefinition,
  schemaNames,
  seedDefinitionsAt0008,
} from "./steps.js";

const migration = "0010-add-term-counts";

const seeded: SeededDefinition[] = [
  ...Array.from({ length: 40 }, (_, i) => ({
    seq: i + 1,
    tenant: "default",
    def: withIds(definition({ name: `Agent ${i + 1}` }), newId(), `Agent_ID=AGENT-${i + 1}`),
    status: i % 7 === 0 ? ("DEACTIVATED" as const) : ("ACTIVE" as const),
    latest: i % 7 !== 0,
  })),
  // Past the first range of seqs the backfill counts in one statement (20,000), in seq 3's shard:
  // both ranges add into the same counter row.
  { seq: 20_019, tenant: "default", def: withIds(definition({ name: "Far" }), newId(), "Agent_ID=AGENT-20019") },
  { seq: 41, tenant: "other", def: withIds(definition({ name: "Other" }), newId(), "Agent_ID=O-41") },
];

/** The terms 0009's write path had written for `row`: its name, and a tag shared by every third definition. */
function termsOf({ seq, tenant, def, status = "ACTIVE", latest = true }: SeededDefinition) {
  const copies = { seq, tenant, status, is_latest: latest };
  return [
    { ...copies, kind: 1, value: def.name },
    { ...copies, kind: 5, value: `tag-${seq % 3}` },
  ];
}

forEachDatabase((db) => {
  const older = useFreshDatabase(db);

  describe(`migration ${migration}`, () => {
    it(
      "counts the terms stored before it " + "per value, status, is_latest and shard, and drops the counters again",
      async () => {
        const direct = await openDatabase(older());
        try {
          await migrateToJustBefore(direct.db, migration);
          await direct.db("tenants").insert({ name: "other", sequence_prefix: "O-" });
          await seedDefinitionsAt0008(direct.db, seeded);
          await direct.db.batchInsert("definition_terms", seeded.flatMap(termsOf), 200);
          const before = await schemaNames(direct.db, "agent_definitions");
          expect(before.indexes).toContain("ix_agent_definitions_tenant_seq");

          await migrateUp(direct.db, migration);
          const expected = new Map<string, number>();
          for (const term of seeded.flatMap(termsOf)) {
            const key =
              `${term.tenant} ${term.kind} ${term.value} ` +
              `${term.status} ${term.is_latest ? 1 : 0} ${term.seq % 16}`;
            expected.set(key, (expected.get(key) ?? 0) + 1);
          }
          expect(expected.get("default 5 tag-0 ACTIVE 1 3")).toBe(2); // seq 3 and seq 20,019
          const counts = await rows<{
            tenant: string;
            kind: number;
            value: string;
            status: string;
            is_latest: number;
            shard: number;
            n: number;
          }>(direct.db, "SELECT tenant, kind, value, status, is_latest, shard, n FROM definition_term_counts");
          const got = new Map(
            counts.map((c) => [
              `${c.tenant} ${Number(c.kind)} ${c.value} ${c.status} ${Number(c.is_latest)} ${Number(c.shard)}`,
              Number(c.n),
            ]),
          );
          expect(got).toEqual(expected);
          const after = await schemaNames(direct.db, "agent_definitions");
          expect(after.indexes).not.toContain("ix_agent_definitions_tenant_seq");
          expect(after.triggers).toEqual(
            [
              ...before.triggers,
              "tr_agent_definitions_terms_delete",
              "tr_definition_terms_count_delete",
              "tr_definition_terms_count_insert",
              "tr_definition_terms_count_update",
            ].sort(),
          );

          await migrateDown(direct.db, migration);
          expect(await direct.db.schema.hasTable("definition_term_counts")).toBe(false);
          expect(await schemaNames(direct.db, "agent_definitions")).toEqual(before);
          expect(await direct.db("definition_terms").count({ n: "*" }).first()).toMatchObject({ n: seeded.length * 2 });
        } finally {
          await direct.db.destroy();
        }
      },
    );
  });
});
