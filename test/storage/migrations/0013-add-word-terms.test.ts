/**
 * Migration 0013 on a database seeded as 0012 left it: every definition
 * stored before it gets a `word` term (kind 10) per distinct folded word of
 * its searchable text, counted by 0010's triggers; a run that died halfway
 * (some rows written) completes when run again, and a second run changes
 * nothing; undone, the word terms and their counters are gone.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../../gen/asor/v1/agent_definition_pb.js";
import { addWordTerms } from "../../../src/storage/migrations/0013-add-word-terms.js";
import { openDatabase } from "../../../src/storage/run/connection.js";
import { forEachDatabase, useFreshDatabase } from "../../support/databases.js";
import { newId, withIds } from "../fixtures.js";
import {
  migrateDown,
  migrateToJustBefore,
  migrateUp,
  rows,
  type SeededDefinition,
  seedDefinitionsAt0008,
} from "./steps.js";

const migration = "0013-add-word-terms";

/** A valid definition with its texts as given. */
const withTexts = (fields: Omit<MessageInitShape<typeof AgentDefinitionSchema>, "$typeName">) =>
  create(AgentDefinitionSchema, {
    url: "https://agents.example.com/a",
    version: "1.0.0",
    provider: { id: "Provider=Acme" },
    ...fields,
  });

const seeded: SeededDefinition[] = [
  {
    seq: 1,
    tenant: "default",
    def: withIds(
      withTexts({
        name: "Café Zèbre",
        description: "ÉCOLE, ﬁle: a payroll-PAYROLL of",
        skills: [{ id: "s", name: "Straße", description: "İstanbul", tags: [{ tag: "x1y" }] }],
        hostConfig: [
          { skillId: "s", executionMode: { id: "M" }, hostResources: [{ toolName: "Ｆｕｌｌ", description: "D" }] },
        ],
      }),
      newId(),
      "Agent_ID=AGENT-1",
    ),
  },
  {
    seq: 2,
    tenant: "default",
    def: withIds(
      withTexts({ name: "Zebre", description: "cafe", skills: [{ id: "t", name: "Ok", description: "" }] }),
      newId(),
      "Agent_ID=AGENT-2",
    ),
    status: "DEACTIVATED",
    latest: false,
  },
];

/** What 0013 writes for the seeded rows, spelled out by hand (seq → words). */
const expected: Record<number, string[]> = {
  1: ["cafe", "zebre", "ecole", "file", "payroll", "straße", "istanbul", "x1y", "full"],
  2: ["zebre", "cafe"],
};

forEachDatabase((db) => {
  const older = useFreshDatabase(db);

  describe(`migration ${migration}`, () => {
    it(
      "writes the word terms of the definitions stored before it, completes a run that died halfway, and goes " +
        "again",
      async () => {
        const direct = await openDatabase(older());
        try {
          await migrateToJustBefore(direct.db, migration);
          await seedDefinitionsAt0008(direct.db, seeded);
          // A run that died halfway: one word row is there already (counted by its trigger).
          await direct.db("definition_terms").insert({
            seq: 1,
            kind: 10,
            value: "cafe",
            tenant: "default",
            status: "ACTIVE",
            is_latest: 1,
          });

          const words = async () =>
            (
              await rows<{ seq: number; value: string; status: string; is_latest: number }>(
                direct.db,
                "SELECT seq, value, status, is_latest FROM definition_terms WHERE kind = 10",
              )
            )
              .map((r) => `${Number(r.seq)} ${r.value} ${r.status} ${Number(r.is_latest)}`)
              .sort();
          const counters = async () =>
            Object.fromEntries(
              (
                await rows<{ value: string; status: string; n: number }>(
                  direct.db,
                  "SELECT value, status, SUM(n) AS n FROM definition_term_counts WHERE kind = 10 " +
                    "GROUP BY value, status",
                )
              )
                .filter((r) => Number(r.n) !== 0)
                .map((r) => [`${r.value} ${r.status}`, Number(r.n)]),
            );
          const wanted = [
            ...expected[1]!.map((w) => `1 ${w} ACTIVE 1`),
            ...expected[2]!.map((w) => `2 ${w} DEACTIVATED 0`),
          ].sort();
          const wantedCounts: Record<string, number> = {};
          for (const w of expected[1]!) wantedCounts[`${w} ACTIVE`] = 1;
          for (const w of expected[2]!) wantedCounts[`${w} DEACTIVATED`] = 1;

          await migrateUp(direct.db, migration);
          expect(await words()).toEqual(wanted);
          expect(await counters()).toEqual(wantedCounts);
          // Run again: nothing more.
          await addWordTerms.up(direct.db);
          expect(await words()).toEqual(wanted);
          expect(await counters()).toEqual(wantedCounts);

          await migrateDown(direct.db, migration);
          expect(await words()).toEqual([]);
          expect(await counters()).toEqual({});
        } finally {
          await direct.db.destroy();
        }
      },
    );
  });
});
