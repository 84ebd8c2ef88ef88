/**
 * Counted totals kept by tenant revision (src/storage/counted-totals.ts, issue 24): a search whose total is a
 * COUNT (two words here) answers the same total again without counting while the tenant is at the revision
 * it was counted at, and counts again after any write that could change it: a new match, an update that
 * takes a word away, a status change. On both databases, through the service on the real repository; and
 * the statement itself, which answers a total it is given only at the revision it is given.
 */
import { create } from "@bufbuild/protobuf";
import { afterAll, beforeAll, expect, it } from "vitest";
import { AgentDefinitionSchema, DefinitionStatus } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  ListAgentDefinitionsRequestSchema,
  SetAgentDefinitionStatusRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { type ListQuery, unfilteredQuery } from "../../src/domain/list-query.js";
import { createRegistryService, type RegistryService } from "../../src/service/registry-service.js";
import { buildSearch, type KnownTotal } from "../../src/storage/queries/search.js";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import { type Database, openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { host } from "./fixtures.js";
import { rows } from "./migrations/steps.js";

const tenant = "default";

/** Agent `name`, whose description is `description` (its words are what `q` finds). */
function agent(name: string, description: string) {
  return create(AgentDefinitionSchema, {
    name,
    description,
    url: "https://agents.example.com/counted",
    version: "1.0.0",
    provider: { id: "Provider=Counted" },
    skills: [{ id: "s", name: "Skill", description: "A skill" }],
  });
}

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  let service: RegistryService;

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    service = createRegistryService({ repository: repo, host });
  });

  afterAll(async () => {
    await repo?.close();
  });

  const upsert = async (name: string, description: string) =>
    (
      await service.upsert(
        tenant,
        create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: agent(name, description) }),
      )
    ).stored;

  /** The total and the ids of `q=amber basalt` (two words: a counted total), first page of 2. */
  const search = async () => {
    const page = await service.list(tenant, create(ListAgentDefinitionsRequestSchema, { q: "amber basalt", limit: 2 }));
    return { total: page.total, revision: page.revision };
  };

  it("answers a counted total again at its revision, and counts again after every write that changes it", async () => {
    const both = [];
    for (let i = 0; i < 5; i++) both.push(await upsert(`Both ${i}`, "Amber and basalt"));
    const both1 = both[1]!;
    for (let i = 0; i < 3; i++) await upsert(`Amber only ${i}`, "Amber alone");
    const first = await search();
    expect(first.total).toBe(5);
    // Again at the same revision: the kept total, which must be the same.
    expect(await search()).toEqual(first);

    // A new match.
    await upsert("Both 5", "Basalt, amber");
    const added = await search();
    expect(added.revision).toBeGreaterThan(first.revision ?? 0);
    expect(added.total).toBe(6);

    // An update that takes a word away (the same key, new content).
    await upsert("Both 0", "Amber only now");
    expect((await search()).total).toBe(5);

    // A status change: DEACTIVATED is not among the list's default statuses.
    await service.setStatus(
      tenant,
      create(SetAgentDefinitionStatusRequestSchema, {
        id: both1.id,
        statusChange: { status: DefinitionStatus.DEACTIVATED },
      }),
    );
    expect((await search()).total).toBe(4);

    // A write that changes none of the matches still moves the revision: counted again, the same.
    await upsert("Unrelated", "Granite");
    const unrelated = await search();
    expect(unrelated.total).toBe(4);
    expect(unrelated.revision).toBeGreaterThan(added.revision ?? 0);
  });

  /** Agent `name` in version `version` (the same name and version: the same key, updated in place). */
  const upsertVersion = async (name: string, description: string, version: string) =>
    (
      await service.upsert(
        tenant,
        create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: { ...agent(name, description), version } }),
      )
    ).stored;

  const setStatus = (id: string, status: DefinitionStatus) =>
    service.setStatus(tenant, create(SetAgentDefinitionStatusRequestSchema, { id, statusChange: { status } }));

  /** `query`'s statement run as it is, or given `known` as the kept total of its count. */
  const readTotal = async (raw: Database, query: ListQuery, known?: KnownTotal) => {
    const statement = buildSearch(raw.dialect, tenant, query, 1 << 20, known === undefined ? undefined : () => known);
    expect(statement.countKey).toBeDefined();
    const [row] = await rows<{ total: number | string; total_version: number | string }>(
      raw.db,
      statement.sql,
      statement.bindings,
    );
    return { total: Number(row?.total), version: Number(row?.total_version) };
  };

  /** A total no count gives: a statement that answers it did not count. */
  const KEPT = 987_654;

  it("has the statement answer a kept total only at the version it was kept at", async () => {
    const raw = await openDatabase(target());
    try {
      const query = { ...unfilteredQuery(2, 0), words: ["amber", "basalt"] };
      const plain = await readTotal(raw, query);
      expect(plain.version).toBeGreaterThan(0);
      for (const [at, expected] of [
        [plain.version, KEPT],
        [plain.version - 1, plain.total],
        [plain.version + 1, plain.total],
      ] as const) {
        const { total } = await readTotal(raw, query, { version: at, total: KEPT });
        expect(total, `kept at version ${at}, read at ${plain.version}`).toBe(expected);
      }
    } finally {
      await raw.db.destroy();
    }
  });

  it("keeps a count of whole words through writes to none of its words, counts after every write to one", async () => {
    const raw = await openDatabase(target());
    try {
      const query = { ...unfilteredQuery(2, 0), words: ["amber", "basalt"], statuses: ["ACTIVE" as const] };
      const latest = { ...query, latest: true };
      // Writes elsewhere in the tenant: a new agent, its update, its status, its new version.
      const elsewhere = await upsertVersion("Granite", "Granite alone", "1.0.0");
      const start = await readTotal(raw, query);
      const startLatest = await readTotal(raw, latest);
      const writesElsewhere: Array<[string, () => Promise<unknown>]> = [
        ["a new agent", () => upsertVersion("Slate", "Slate and shale", "1.0.0")],
        ["an update of the same key", () => upsertVersion("Granite", "Granite and slate", "1.0.0")],
        ["a status change", () => setStatus(elsewhere.id, DefinitionStatus.DEPRECATED)],
        ["a new version (the one before no longer latest)", () => upsertVersion("Granite", "Granite", "2.0.0")],
      ];
      for (const [what, write] of writesElsewhere) {
        await write();
        expect(await readTotal(raw, query, { version: start.version, total: KEPT }), what).toEqual({
          total: KEPT,
          version: start.version,
        });
        expect((await readTotal(raw, latest, { version: startLatest.version, total: KEPT })).total, what).toBe(KEPT);
      }

      // Writes to term rows of the words: each moves the version, so the statement counts.
      const match = await upsertVersion("Both A", "Amber and basalt", "1.0.0");
      const writesToTheWords: Array<[string, ListQuery, () => Promise<unknown>]> = [
        ["a definition with one of the words", query, () => upsertVersion("Amber A", "Amber alone", "1.0.0")],
        ["a new match", query, () => upsertVersion("Both B", "Basalt, amber", "1.0.0")],
        ["a status change of a match", query, () => setStatus(match.id, DefinitionStatus.DEPRECATED)],
        ["the status changed back", query, () => setStatus(match.id, DefinitionStatus.ACTIVE)],
        ["an update that takes a word away", query, () => upsertVersion("Both B", "Basalt alone", "1.0.0")],
        ["a new version of a match", latest, () => upsertVersion("Both A", "Amber, basalt", "2.0.0")],
      ];
      for (const [what, asked, write] of writesToTheWords) {
        const before = await readTotal(raw, asked);
        await write();
        const after = await readTotal(raw, asked, { version: before.version, total: KEPT });
        expect(after.version, what).toBeGreaterThan(before.version);
        expect(after.total, what).toBe((await readTotal(raw, asked)).total);
      }
    } finally {
      await raw.db.destroy();
    }
  });

  it("keeps a count reading more than whole words (updatedSince, a word begun) while the tenant holds", async () => {
    const raw = await openDatabase(target());
    try {
      const queries: Array<[string, ListQuery]> = [
        ["updatedSince", { ...unfilteredQuery(2, 0), words: ["amber", "basalt"], updatedSince: new Date(0) }],
        [
          "a word begun",
          {
            ...unfilteredQuery(2, 0),
            terms: [
              { kind: "word", values: ["amber"] },
              { kind: "word", values: [], range: { from: "bas", below: "bat" } },
            ],
          },
        ],
      ];
      for (const [what, query] of queries) {
        const before = await readTotal(raw, query);
        expect((await readTotal(raw, query, { version: before.version, total: KEPT })).total, what).toBe(KEPT);
        await upsertVersion(`Elsewhere ${what}`, "Pumice", "1.0.0");
        const after = await readTotal(raw, query, { version: before.version, total: KEPT });
        expect(after.version, what).toBeGreaterThan(before.version);
        expect(after.total, what).toBe(before.total);
      }
    } finally {
      await raw.db.destroy();
    }
  });

  it("answers every counted total as a count does, through random writes and the totals it kept", async () => {
    const raw = await openDatabase(target());
    try {
      // A small PRNG with a fixed seed: the same writes every run (mulberry32).
      let seed = 0x5eed_2024;
      const random = () => {
        seed = (seed + 0x6d2b79f5) | 0;
        let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
        t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
        return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
      };
      const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)] as T;
      const vocabulary = ["ochre", "umber", "sienna", "sepia"];
      const ids: string[] = [];
      const queries: ListQuery[] = [];
      for (const [a, b] of [
        ["ochre", "umber"],
        ["sienna", "sepia"],
        ["ochre", "sepia"],
      ] as const) {
        const words = { ...unfilteredQuery(3, 0), words: [a, b] };
        queries.push(words, { ...words, statuses: ["ACTIVE"] }, { ...words, latest: true });
      }
      for (let step = 0; step < 60; step++) {
        const roll = random();
        if (roll < 0.6 || ids.length === 0) {
          const words = vocabulary.filter(() => random() < 0.5);
          const stored = await upsertVersion(
            `Pigment ${pick(["a", "b", "c", "d"])}`,
            `Pigments: ${words.join(", ")} and more`,
            pick(["1.0.0", "2.0.0", "3.0.0"]),
          );
          ids.push(stored.id);
        } else await setStatus(pick(ids), pick([DefinitionStatus.ACTIVE, DefinitionStatus.DEPRECATED]));
        for (const query of queries) {
          const answered = await repo.search(tenant, query);
          const counted = await readTotal(raw, query);
          expect(
            answered.total,
            `step ${step}, ${JSON.stringify(query.words)} ${query.statuses} latest ${query.latest}`,
          ).toBe(counted.total);
        }
      }
    } finally {
      await raw.db.destroy();
    }
  });
});
