/**
 * Migration 0009 on a database seeded as 0008 left it: the side tables of the
 * list's filters, keyword search and totals are made and filled from the
 * definitions there are, with exactly the terms and words 0009 indexed when it
 * shipped (its frozen copy, not today's write path); undone, they are gone.
 * search.test.ts runs 0009 and 0010 down and up again under the list and
 * checks that it answers as before.
 */
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../../gen/asor/v1/agent_definition_pb.js";
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

const migration = "0009-add-search-index";

/** A definition with a value for every exact filter, a repeated tag and a repeated resource. */
const rich = create(AgentDefinitionSchema, {
  id: newId(),
  referenceId: "Agent_ID=AGENT-3",
  name: "Ledger Bot",
  description: "Files Ünïcødé-reports, fast!",
  overview: "Über 2 agents",
  url: "https://agents.example.com/ledger",
  version: "2.0",
  provider: { id: "Provider=Acme" },
  platform: { id: "Platform=X" },
  externalAgentId: "ext-1",
  skills: [
    {
      id: "file",
      name: "File",
      description: "Files one report.",
      tags: [{ tag: "Finance" }, { tag: "finance" }, { tag: "Finance" }],
    },
    { id: "audit", name: "Audit", description: "" },
  ],
  hostConfig: [
    {
      skillId: "file",
      executionMode: { id: "Mode=Delegate" },
      hostResources: [
        { toolName: "t", description: "d", agentResource: { id: "Res=1" } },
        { toolName: "u", description: "d", agentResource: { id: "Res=1" } },
      ],
    },
  ],
});

/** What 0009 indexed of `rich`: [kind, value], by kind (1 name ... 9 externalAgentID) and value. */
const richTerms = [
  [1, "Ledger Bot"],
  [2, "Provider=Acme"],
  [3, "Platform=X"],
  [4, "2.0"],
  [5, "Finance"],
  [5, "finance"],
  [6, "audit"],
  [6, "file"],
  [7, "Mode=Delegate"],
  [8, "Res=1"],
  [9, "ext-1"],
];
const richText =
  "ledger bot files ünïcødé reports fast über 2 agents file files one report finance finance finance audit";

/** More definitions than one backfill batch (500), and more terms than one insert (1,000 rows). */
const bulk = 1_050;

const seeded: SeededDefinition[] = [
  { seq: 3, tenant: "default", def: rich },
  {
    seq: 5,
    tenant: "other",
    def: withIds(definition({ name: "Retired" }), newId(), "Agent_ID=O-5"),
    status: "DEACTIVATED",
    latest: false,
  },
  ...Array.from({ length: bulk }, (_, i) => ({
    seq: 100 + i,
    tenant: "default",
    def: withIds(definition({ name: `Bulk ${i}` }), newId(), `Agent_ID=AGENT-${100 + i}`),
    status: i % 10 === 0 ? ("DEPRECATED" as const) : ("ACTIVE" as const),
  })),
];

const listIndexes = [
  "ix_agent_definitions_list_created",
  "ix_agent_definitions_list_name",
  "ix_agent_definitions_list_updated",
];
const triggers = [
  "tr_agent_definitions_search_delete",
  "tr_agent_definitions_search_insert",
  "tr_agent_definitions_search_update",
];

forEachDatabase((db) => {
  const older = useFreshDatabase(db);

  describe(`migration ${migration}`, () => {
    it(
      "indexes the definitions stored before it as it did when it shipped, " +
        "counts them per shard, and drops it all again",
      async () => {
        const direct = await openDatabase(older());
        try {
          await migrateToJustBefore(direct.db, migration);
          await direct.db("tenants").insert({ name: "other", sequence_prefix: "O-" });
          await seedDefinitionsAt0008(direct.db, seeded);

          await migrateUp(direct.db, migration);
          type Term = { seq: number; kind: number; value: string; tenant: string; status: string; is_latest: number };
          const terms = await rows<Term>(
            direct.db,
            "SELECT seq, kind, value, tenant, status, is_latest FROM definition_terms ORDER BY seq, kind, value",
          );
          const termsOf = (seq: number) => terms.filter((t) => Number(t.seq) === seq);
          expect(termsOf(3).map((t) => [Number(t.kind), t.value])).toEqual(richTerms);
          expect(
            termsOf(3).every((t) => t.tenant === "default" && t.status === "ACTIVE" && Number(t.is_latest) === 1),
          ).toBe(true);
          // Status and is_latest are copied from the row: the triggers keep them from here on.
          expect(termsOf(5).map((t) => [Number(t.kind), t.value, t.tenant, t.status, Number(t.is_latest)])).toEqual([
            [1, "Retired", "other", "DEACTIVATED", 0],
            [2, "Provider=Acme", "other", "DEACTIVATED", 0],
            [4, "1.0.0", "other", "DEACTIVATED", 0],
            [6, "file", "other", "DEACTIVATED", 0],
          ]);
          expect(termsOf(100 + bulk - 1).map((t) => [Number(t.kind), t.value])).toEqual([
            [1, `Bulk ${bulk - 1}`],
            [2, "Provider=Acme"],
            [4, "1.0.0"],
            [6, "file"],
          ]);
          expect(terms).toHaveLength(richTerms.length + 4 + 4 * bulk);

          const texts = await rows<{ seq: number; tenant: string; status: string; is_latest: number; body: string }>(
            direct.db,
            direct.dialect === "mysql"
              ? "SELECT seq, tenant, status, is_latest, body FROM definition_text ORDER BY seq"
              : "SELECT rowid AS seq, tenant, status, is_latest, body FROM definition_fts ORDER BY rowid",
          );
          expect(texts).toHaveLength(seeded.length);
          expect(
            texts.slice(0, 3).map((t) => [Number(t.seq), t.tenant, t.status, Number(t.is_latest), t.body]),
          ).toEqual([
            [3, "default", "ACTIVE", 1, richText],
            [5, "other", "DEACTIVATED", 0, "retired files expense reports file files one report"],
            [100, "default", "DEPRECATED", 1, "bulk 0 files expense reports file files one report"],
          ]);

          // The unfiltered totals: one counter row per tenant, status, is_latest and shard (seq % 16).
          const expected = new Map<string, number>();
          for (const { seq, tenant, status = "ACTIVE", latest = true } of seeded) {
            const key = `${tenant} ${status} ${latest ? 1 : 0} ${seq % 16}`;
            expected.set(key, (expected.get(key) ?? 0) + 1);
          }
          const counts = await rows<{ tenant: string; status: string; is_latest: number; shard: number; n: number }>(
            direct.db,
            "SELECT tenant, status, is_latest, shard, n FROM definition_counts",
          );
          expect(
            new Map(
              counts.map((c) => [`${c.tenant} ${c.status} ${Number(c.is_latest)} ${Number(c.shard)}`, Number(c.n)]),
            ),
          ).toEqual(expected);

          const made = await schemaNames(direct.db, "agent_definitions");
          expect(made.indexes).toEqual(expect.arrayContaining(listIndexes));
          expect(made.triggers).toEqual(triggers);

          await migrateDown(direct.db, migration);
          for (const table of ["definition_terms", "definition_text", "definition_fts", "definition_counts"]) {
            expect(await direct.db.schema.hasTable(table), table).toBe(false);
          }
          const left = await schemaNames(direct.db, "agent_definitions");
          expect(left.indexes.filter((name) => listIndexes.includes(name))).toEqual([]);
          expect(left.triggers).toEqual([]);
          expect(
            Number(((await direct.db("agent_definitions").count({ n: "*" }).first()) as { n: number | string }).n),
          ).toBe(seeded.length);
        } finally {
          await direct.db.destroy();
        }
      },
    );
  });
});
