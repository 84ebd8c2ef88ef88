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
import { unfilteredQuery } from "../../src/domain/list-query.js";
import { createRegistryService, type RegistryService } from "../../src/service/registry-service.js";
import { buildSearch } from "../../src/storage/queries/search.js";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import { openDatabase } from "../../src/storage/run/connection.js";
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

  it("has the statement answer a kept total only at the revision it was kept at", async () => {
    const raw = await openDatabase(target());
    try {
      const query = { ...unfilteredQuery(2, 0), words: ["amber", "basalt"] };
      const counted = buildSearch(raw.dialect, tenant, query, 1 << 20);
      expect(counted.countKey).toBeDefined();
      const [plain] = await rows<{ total: number | string; tenant_revision: number | string }>(
        raw.db,
        counted.sql,
        counted.bindings,
      );
      const revision = Number(plain?.tenant_revision);
      expect(revision).toBeGreaterThan(0);
      // A total no count gives: answered as it is at the tenant's revision (so nothing was counted), and not
      // at another.
      const given = (at: number) =>
        buildSearch(raw.dialect, tenant, query, 1 << 20, (key) =>
          key === counted.countKey ? { revision: at, total: 987_654 } : undefined,
        );
      for (const [at, expected] of [
        [revision, 987_654],
        [revision - 1, Number(plain?.total)],
        [revision + 1, Number(plain?.total)],
      ] as const) {
        const statement = given(at);
        const [row] = await rows<{ total: number | string }>(raw.db, statement.sql, statement.bindings);
        expect(Number(row?.total), `kept at revision ${at}, the tenant at ${revision}`).toBe(expected);
      }
    } finally {
      await raw.db.destroy();
    }
  });
});
