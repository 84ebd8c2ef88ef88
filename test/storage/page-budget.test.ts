/**
 * The byte budget of a page (PAGE_MAX_BYTES, issue 25): a list or versions
 * page ends before the definition that would take its stored JSON past the
 * budget, answers at least one definition whatever its size, and its
 * nextPageToken leads on to every definition, once, in order: on both
 * databases and in every order.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  ListAgentDefinitionsRequestSchema,
  ListAgentDefinitionVersionsRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { unfilteredQuery } from "../../src/domain/list-query.js";
import {
  createRegistryService,
  type DefinitionPage,
  type RegistryService,
} from "../../src/service/registry-service.js";
import { buildSearch } from "../../src/storage/queries/search.js";
import type { AgentDefinitionRepository, StoredDefinition } from "../../src/storage/repository.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { host } from "./fixtures.js";
import { rows } from "./migrations/steps.js";

const tenant = "default";
const maxBytes = 24 * 1024;

/** Description lengths of the fixture, in creation order: small ones, ones near the budget, and one far past it. */
const sizes = [200, 9_000, 9_000, 300, 15_000, 40_000, 400, 500, 23_000, 100, 7_000, 8_000, 9_000];

/** Version 1.0.<i> of one agent, with about `size` bytes of skill descriptions (a description holds at most 10,000). */
function sized(i: number, size: number) {
  const letter = String.fromCharCode(97 + i);
  const skills = Array.from({ length: Math.ceil(size / 8_000) }, (_, n) => ({
    id: `s${n}`,
    name: `Skill ${n}`,
    description: letter.repeat(Math.min(8_000, size - n * 8_000)),
  }));
  return create(AgentDefinitionSchema, {
    name: "Big Agent",
    description: "Carries a lot.",
    url: "https://agents.example.com/big",
    version: `1.0.${i}`,
    provider: { id: "Provider=Acme" },
    skills,
  });
}

type ListInit = Omit<MessageInitShape<typeof ListAgentDefinitionsRequestSchema>, "$typeName">;

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  let service: RegistryService;
  /** Every stored definition, in creation order. */
  const created: StoredDefinition[] = [];

  beforeAll(async () => {
    repo = await createSqlRepository({ ...target(), pageMaxBytes: maxBytes });
    service = createRegistryService({ repository: repo, host });
    for (const [i, size] of sizes.entries()) {
      // Every definition a version of one agent (one name and provider), so the versions list pages them too.
      const def = sized(i, size);
      const { stored } = await service.upsert(
        tenant,
        create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: def }),
      );
      created.push(stored);
    }
  });

  afterAll(async () => {
    await repo?.close();
  });

  /** Every page of a paged read, following nextPageToken from the first. */
  async function allPages(read: (pageToken: string | undefined) => Promise<DefinitionPage>): Promise<DefinitionPage[]> {
    const pages: DefinitionPage[] = [];
    let token: string | undefined;
    do {
      const page = await read(token);
      pages.push(page);
      token = page.nextPageToken;
    } while (token !== undefined && pages.length <= sizes.length);
    return pages;
  }

  const bytesOf = (data: readonly StoredDefinition[]) => data.reduce((sum, s) => sum + s.json.byteLength, 0);

  /** The budget's rule, page by page: within it (or a single definition), and not cut before it had to be. */
  function expectBudgeted(pages: readonly DefinitionPage[], expected: readonly StoredDefinition[]): void {
    expect(pages.flatMap((p) => p.data.map((s) => s.id))).toEqual(expected.map((s) => s.id));
    let at = 0;
    for (const page of pages) {
      expect(page.data.length).toBeGreaterThan(0);
      if (page.data.length > 1) expect(bytesOf(page.data)).toBeLessThanOrEqual(maxBytes);
      at += page.data.length;
      const following = expected[at];
      // The definition after the page would have taken it past the budget.
      if (following !== undefined) expect(bytesOf(page.data) + following.json.byteLength).toBeGreaterThan(maxBytes);
      expect(page.total).toBe(expected.length);
    }
  }

  const list = (init: ListInit) => (pageToken: string | undefined) =>
    service.list(
      tenant,
      create(ListAgentDefinitionsRequestSchema, {
        limit: 100,
        ...init,
        ...(pageToken === undefined ? {} : { pageToken }),
      }),
    );

  it("cuts a list page at the budget and leads on to every definition by its token", async () => {
    const pages = await allPages(list({}));
    expect(pages.length).toBeGreaterThan(3);
    expectBudgeted(pages, created);
  });

  it("answers a definition larger than the budget alone on its page", async () => {
    const pages = await allPages(list({}));
    const huge = created[sizes.indexOf(40_000)];
    expect(huge?.json.byteLength).toBeGreaterThan(maxBytes);
    expect(pages.find((p) => p.data.some((s) => s.id === huge?.id))?.data).toHaveLength(1);
  });

  it("keeps `limit` when it ends the page first", async () => {
    const pages = await allPages(list({ limit: 2 }));
    expect(pages.every((p) => p.data.length <= 2)).toBe(true);
    expect(pages.flatMap((p) => p.data.map((s) => s.id))).toEqual(created.map((s) => s.id));
  });

  describe("in every order", () => {
    it("newest first", async () => {
      expectBudgeted(await allPages(list({ orderBy: "createdAt desc" })), [...created].reverse());
    });
    it("by name, then version order of creation", async () => {
      // One name: the order value ties, and seq decides.
      expectBudgeted(await allPages(list({ orderBy: "name" })), created);
    });
    it("by updatedAt, newest first", async () => {
      const pages = await allPages(list({ orderBy: "updatedAt desc" }));
      const expected = [...created].sort(
        (a, b) => b.updatedAt.getTime() - a.updatedAt.getTime() || created.indexOf(b) - created.indexOf(a),
      );
      expectBudgeted(pages, expected);
    });
    it("filtered by a keyword", async () => {
      expectBudgeted(await allPages(list({ q: "big" })), created);
    });
  });

  it("reads only the rows a page answers, and the one after them", async () => {
    // The statement itself, as the repository sends it: the budget holds in the database, not
    // only in what the repository keeps, so a page of large definitions is never read whole.
    const raw = await openDatabase(target());
    try {
      const { sql, bindings } = buildSearch(raw.dialect, tenant, unfilteredQuery(100, 0), maxBytes);
      const read = await rows<{ id: string | null }>(raw.db, sql, bindings);
      const [first] = await allPages(list({}));
      expect(read.filter((row) => row.id !== null)).toHaveLength((first?.data.length ?? 0) + 1);
    } finally {
      await raw.db.destroy();
    }
  });

  it("cuts a versions page at the budget too", async () => {
    const [first] = created;
    const pages = await allPages((pageToken) =>
      service.listVersions(
        tenant,
        create(ListAgentDefinitionVersionsRequestSchema, {
          id: first?.id,
          limit: 100,
          ...(pageToken === undefined ? {} : { pageToken }),
        }),
      ),
    );
    expect(pages.length).toBeGreaterThan(3);
    expectBudgeted(pages, [...created].reverse());
  });
});
