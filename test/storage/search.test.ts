/**
 * The list's filters, keyword search, orders, totals and keyset pages,
 * through the real service on the real repository (SQLite and MariaDB), and
 * the side tables of migrations 0009 and 0010 they are served from.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  ListAgentDefinitionsRequestSchema,
  ListAgentDefinitionVersionsRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { RegistryError } from "../../src/domain/errors.js";
import { createRegistryService, type RegistryService } from "../../src/service/registry-service.js";
import { migrationSource } from "../../src/storage/migrations/index.js";
import type { AgentDefinitionRepository, StoredDefinition } from "../../src/storage/repository.js";
import type { Database } from "../../src/storage/run/connection.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { groupCounts } from "../support/counters.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { fromJsonBytes, host } from "./fixtures.js";

const tenant = "default";

type ListInit = Omit<MessageInitShape<typeof ListAgentDefinitionsRequestSchema>, "$typeName">;

/** A definition with what the filters look at; the rest valid and fixed. */
function agent(fields: {
  name: string;
  version?: string;
  provider?: string;
  platform?: string;
  description?: string;
  overview?: string;
  externalAgentId?: string;
  skills: Array<{
    id: string;
    name?: string;
    description?: string;
    tags?: string[];
    mode?: string;
    resources?: string[];
  }>;
}): AgentDefinition {
  return create(AgentDefinitionSchema, {
    name: fields.name,
    description: fields.description ?? "An agent.",
    url: "https://agents.example.com/a",
    version: fields.version ?? "1.0.0",
    provider: { id: fields.provider ?? "Provider=Acme" },
    ...(fields.platform === undefined ? {} : { platform: { id: fields.platform } }),
    ...(fields.overview === undefined ? {} : { overview: fields.overview }),
    ...(fields.externalAgentId === undefined ? {} : { externalAgentId: fields.externalAgentId }),
    skills: fields.skills.map((s) => ({
      id: s.id,
      name: s.name ?? s.id,
      description: s.description ?? "Does it.",
      tags: (s.tags ?? []).map((tag) => ({ tag })),
    })),
    hostConfig: fields.skills
      .filter((s) => s.mode !== undefined)
      .map((s) => ({
        skillId: s.id,
        executionMode: { id: s.mode },
        hostResources: (s.resources ?? []).map((id) => ({ toolName: "T", description: "D", agentResource: { id } })),
      })),
  });
}

/** The fixture: six definitions (five agents; Alpha has two versions). */
const fixtures = [
  agent({
    name: "Alpha",
    platform: "Platform=OTHER",
    externalAgentId: "ext-alpha",
    description: "Analyzes customer sentiment",
    skills: [
      {
        id: "sentiment",
        name: "Sentiment Analysis",
        tags: ["cognitive", "support"],
        mode: "Mode=Ambient",
        resources: ["res-1"],
      },
    ],
  }),
  agent({
    name: "Beta",
    version: "2.0.0",
    platform: "Platform=CLOUD",
    description: "Routes tickets",
    skills: [
      {
        id: "routing",
        name: "Ticket Routing",
        description: "Routes customer tickets",
        tags: ["integration"],
        mode: "Mode=Delegate",
        resources: ["res-2"],
      },
    ],
  }),
  agent({
    name: "Gamma",
    provider: "Provider=Other",
    overview: "Zebra crossing café",
    skills: [
      {
        id: "sentiment",
        name: "Mood",
        description: "Reads the customer",
        tags: ["support"],
        mode: "Mode=Delegate",
        resources: ["res-1", "res-2"],
      },
    ],
  }),
  agent({
    name: "Delta",
    provider: "Provider=Other",
    description: "Nothing in common",
    skills: [{ id: "misc", tags: ["Support"] }],
  }),
  agent({
    name: "Alpha",
    version: "2.0.0",
    platform: "Platform=OTHER",
    description: "Analyzes customer sentiment, better",
    skills: [{ id: "sentiment", tags: ["cognitive"] }],
  }),
  agent({ name: "Epsilon", description: "The end of the list", skills: [{ id: "misc" }] }),
];

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  let service: RegistryService;
  let raw: Database;
  /** The stored fixtures, by "name version". */
  const stored = new Map<string, StoredDefinition>();

  const upsert = async (def: AgentDefinition, inTenant = tenant) =>
    (await service.upsert(inTenant, create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: def }))).stored;
  const list = (init: ListInit, inTenant = tenant) =>
    service.list(inTenant, create(ListAgentDefinitionsRequestSchema, init));
  /** "name version" of each definition of a page, in order. */
  const keys = (page: { data: readonly StoredDefinition[] }) =>
    page.data.map((s) => {
      const def = fromJsonBytes(s);
      return `${def.name} ${def.version}`;
    });
  const errorOf = async (promise: Promise<unknown>) => {
    const error = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RegistryError);
    return error as RegistryError;
  };

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    raw = await openDatabase(target());
    service = createRegistryService({ repository: repo, host });
    await repo.createTenant("other", "OTHER-");
    for (const def of fixtures) {
      const s = await upsert(def);
      stored.set(`${def.name} ${def.version}`, s);
      // Distinct updated_at values for orderBy=updatedAt.
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Epsilon is deactivated: out of the default list.
    const epsilon = stored.get("Epsilon 1.0.0")!;
    await repo.write(tenant, async (tx) => {
      const version = await tx.findByIdForUpdate(epsilon.id);
      await tx.setStatus([version!], "DEACTIVATED", null);
    });
    // Beta is deprecated: still listed by default.
    const beta = stored.get("Beta 2.0.0")!;
    await repo.write(tenant, async (tx) => {
      const version = await tx.findByIdForUpdate(beta.id);
      await tx.setStatus([version!], "DEPRECATED", "use Alpha");
    });
    // Another tenant's definitions never show.
    await upsert(agent({ name: "Alpha", skills: [{ id: "sentiment", tags: ["support"] }] }), "other");
  });

  afterAll(async () => {
    await repo?.close();
    await raw?.db.destroy();
  });

  describe("filters", () => {
    const cases: Array<[string, ListInit, string[]]> = [
      [
        "no filter: every status but DEACTIVATED, oldest first",
        {},
        ["Alpha 1.0.0", "Beta 2.0.0", "Gamma 1.0.0", "Delta 1.0.0", "Alpha 2.0.0"],
      ],
      ["name", { name: ["Alpha"] }, ["Alpha 1.0.0", "Alpha 2.0.0"]],
      ["name given twice ORs", { name: ["Alpha", "Delta"] }, ["Alpha 1.0.0", "Delta 1.0.0", "Alpha 2.0.0"]],
      ["name compares exactly", { name: ["alpha"] }, []],
      ["provider", { provider: ["Provider=Other"] }, ["Gamma 1.0.0", "Delta 1.0.0"]],
      ["platform", { platform: ["Platform=CLOUD"] }, ["Beta 2.0.0"]],
      ["version", { version: ["2.0.0"] }, ["Beta 2.0.0", "Alpha 2.0.0"]],
      ["tag", { tag: ["support"] }, ["Alpha 1.0.0", "Gamma 1.0.0"]],
      ["tag compares exactly", { tag: ["Support"] }, ["Delta 1.0.0"]],
      [
        "tag given twice ORs, each definition once",
        { tag: ["support", "cognitive"] },
        ["Alpha 1.0.0", "Gamma 1.0.0", "Alpha 2.0.0"],
      ],
      ["skillId", { skillId: ["sentiment"] }, ["Alpha 1.0.0", "Gamma 1.0.0", "Alpha 2.0.0"]],
      ["executionMode", { executionMode: ["Mode=Delegate"] }, ["Beta 2.0.0", "Gamma 1.0.0"]],
      ["resource", { resource: ["res-2"] }, ["Beta 2.0.0", "Gamma 1.0.0"]],
      ["externalAgentID", { externalAgentId: ["ext-alpha"] }, ["Alpha 1.0.0"]],
      ["status", { status: ["DEPRECATED"] }, ["Beta 2.0.0"]],
      ["status DEACTIVATED", { status: ["DEACTIVATED"] }, ["Epsilon 1.0.0"]],
      [
        "status ALL",
        { status: ["ALL"] },
        ["Alpha 1.0.0", "Beta 2.0.0", "Gamma 1.0.0", "Delta 1.0.0", "Alpha 2.0.0", "Epsilon 1.0.0"],
      ],
      [
        "status given twice ORs",
        { status: ["ACTIVE", "DEACTIVATED"] },
        ["Alpha 1.0.0", "Gamma 1.0.0", "Delta 1.0.0", "Alpha 2.0.0", "Epsilon 1.0.0"],
      ],
      ["latest", { latest: true }, ["Beta 2.0.0", "Gamma 1.0.0", "Delta 1.0.0", "Alpha 2.0.0"]],
      [
        "latest=false is no filter",
        { latest: false },
        ["Alpha 1.0.0", "Beta 2.0.0", "Gamma 1.0.0", "Delta 1.0.0", "Alpha 2.0.0"],
      ],
      ["q: one word, a word's beginning", { q: "sentim" }, ["Alpha 1.0.0", "Alpha 2.0.0"]],
      ["q: only the last word is a beginning; the others are whole words", { q: "sentim customer" }, []],
      ["q: a whole word, then a beginning", { q: "customer sentim" }, ["Alpha 1.0.0", "Alpha 2.0.0"]],
      ["q: the last word begins several words (routes, routing)", { q: "rout" }, ["Beta 2.0.0"]],
      ["q: a beginning that begins no word", { q: "customer zzz" }, []],
      ["q: case-insensitive, in a skill's name", { q: "TICKET" }, ["Beta 2.0.0"]],
      ["q: every word must appear", { q: "customer reads" }, ["Gamma 1.0.0"]],
      ["q: in the overview, accents as written", { q: "café zebra" }, ["Gamma 1.0.0"]],
      ["q: accents and case folded: CAFE finds café", { q: "zebra CAFE" }, ["Gamma 1.0.0"]],
      ["q: accents folded in q: cafë finds café", { q: "cafë" }, ["Gamma 1.0.0"]],
      ["q: in a tag", { q: "integration" }, ["Beta 2.0.0"]],
      [
        "q: words shorter than 3 are ignored",
        { q: "a customer of" },
        ["Alpha 1.0.0", "Beta 2.0.0", "Gamma 1.0.0", "Alpha 2.0.0"],
      ],
      ["q: no match", { q: "nowhere" }, []],
      ["q and a filter", { q: "customer", provider: ["Provider=Acme"] }, ["Alpha 1.0.0", "Beta 2.0.0", "Alpha 2.0.0"]],
      ["q and latest", { q: "customer", latest: true }, ["Beta 2.0.0", "Gamma 1.0.0", "Alpha 2.0.0"]],
      ["q and status", { q: "end", status: ["ALL"] }, ["Epsilon 1.0.0"]],
      ["two filters AND", { tag: ["support"], provider: ["Provider=Acme"] }, ["Alpha 1.0.0"]],
      [
        "three filters AND",
        { skillId: ["sentiment"], version: ["2.0.0"], platform: ["Platform=OTHER"] },
        ["Alpha 2.0.0"],
      ],
      ["filter and latest", { name: ["Alpha"], latest: true }, ["Alpha 2.0.0"]],
      ["filter and status", { provider: ["Provider=Acme"], status: ["DEPRECATED"] }, ["Beta 2.0.0"]],
      ["resource and executionMode", { resource: ["res-1"], executionMode: ["Mode=Delegate"] }, ["Gamma 1.0.0"]],
      ["no match of two filters", { tag: ["integration"], provider: ["Provider=Other"] }, []],
    ];
    it.each(cases)("%s", async (_, request, expected) => {
      const page = await list({ ...request, limit: 100 });
      expect(keys(page)).toEqual(expected);
      expect(page.total).toBe(expected.length);
      expect(page.nextPageToken).toBeUndefined();
    });

    it("counts every match in total, whatever the page", async () => {
      const page = await list({ tag: ["support", "cognitive"], limit: 1 });
      expect(keys(page)).toEqual(["Alpha 1.0.0"]);
      expect(page.total).toBe(3);
      const q = await list({ q: "customer", limit: 2 });
      expect(q.total).toBe(4);
      expect(q.data).toHaveLength(2);
      // Past the last match: no rows to carry the count of a keyword search's one pass (MariaDB).
      const past = await list({ q: "customer", limit: 2, offset: 10 });
      expect([past.total, past.data.length]).toEqual([4, 0]);
      const all = await list({ status: ["ALL"], limit: 1, offset: 5 });
      expect([all.total, keys(all)]).toEqual([6, ["Epsilon 1.0.0"]]);
    });

    it("filters by updatedSince, inclusive", async () => {
      const gamma = stored.get("Gamma 1.0.0")!;
      // Beta's status change (after every insert) updated it too.
      const page = await list({ updatedSince: gamma.updatedAt.toISOString(), limit: 100 });
      expect(keys(page)).toEqual(["Beta 2.0.0", "Gamma 1.0.0", "Delta 1.0.0", "Alpha 2.0.0"]);
      expect(page.total).toBe(4);
      const withFilter = await list({
        updatedSince: gamma.updatedAt.toISOString(),
        provider: ["Provider=Acme"],
        limit: 100,
      });
      expect(keys(withFilter)).toEqual(["Beta 2.0.0", "Alpha 2.0.0"]);
      const withQ = await list({ updatedSince: new Date(gamma.updatedAt.getTime() + 1).toISOString(), q: "customer" });
      expect(keys(withQ)).toEqual(["Beta 2.0.0", "Alpha 2.0.0"]);
      expect(withQ.total).toBe(2);
      expect((await list({ updatedSince: new Date(Date.now() + 60_000).toISOString() })).total).toBe(0);
    });

    it("refuses a bad updatedSince, orderBy or q, naming the parameter", async () => {
      for (const [request, field] of [
        [{ updatedSince: "yesterday" }, "updatedSince"],
        [{ orderBy: "seq" }, "orderBy"],
        [{ orderBy: "name  desc" }, "orderBy"],
        [{ q: "a b" }, "q"],
        [{ status: ["GONE"] }, "status"],
      ] as const) {
        const error = await errorOf(list(request as ListInit));
        expect(error.code).toBe("VALIDATION_FAILED");
        expect(error.issues[0]).toMatchObject({ field });
      }
    });

    it("keeps another tenant's definitions out", async () => {
      const page = await list({ name: ["Alpha"] }, "other");
      expect(page.total).toBe(1);
      expect((await list({ q: "customer" }, "other")).total).toBe(0);
    });

    it("follows an update: the old terms and words go, the new ones come", async () => {
      const before = await list({ tag: ["renamed"] });
      expect(before.total).toBe(0);
      const def = agent({
        name: "Delta",
        provider: "Provider=Other",
        description: "Quokka now",
        skills: [{ id: "misc", tags: ["renamed"] }],
      });
      await upsert(def);
      expect(keys(await list({ tag: ["renamed"] }))).toEqual(["Delta 1.0.0"]);
      expect((await list({ tag: ["Support"] })).total).toBe(0);
      expect(keys(await list({ q: "quokka" }))).toEqual(["Delta 1.0.0"]);
      expect((await list({ q: "nothing common" })).total).toBe(0);
      await upsert(fixtures[3]!);
      expect(keys(await list({ tag: ["Support"] }))).toEqual(["Delta 1.0.0"]);
    });
  });

  describe("order", () => {
    it("orders by createdAt, updatedAt or name, each ascending or descending", async () => {
      const created = ["Alpha 1.0.0", "Beta 2.0.0", "Gamma 1.0.0", "Delta 1.0.0", "Alpha 2.0.0"];
      expect(keys(await list({ orderBy: "createdAt" }))).toEqual(created);
      expect(keys(await list({ orderBy: "createdAt desc" }))).toEqual([...created].reverse());
      expect(keys(await list({ orderBy: "name" }))).toEqual([
        "Alpha 1.0.0",
        "Alpha 2.0.0",
        "Beta 2.0.0",
        "Delta 1.0.0",
        "Gamma 1.0.0",
      ]);
      expect(keys(await list({ orderBy: "name desc" }))).toEqual([
        "Gamma 1.0.0",
        "Delta 1.0.0",
        "Beta 2.0.0",
        "Alpha 2.0.0",
        "Alpha 1.0.0",
      ]);
      // Beta's status changes raised its updatedAt past the others'.
      const updated = await list({ orderBy: "updatedAt" });
      const byUpdate = [...updated.data].sort((a, b) => a.updatedAt.getTime() - b.updatedAt.getTime());
      expect(updated.data.map((d) => d.id)).toEqual(byUpdate.map((d) => d.id));
      expect(keys(await list({ orderBy: "updatedAt desc" }))).toEqual(keys(updated).reverse());
      expect(keys(await list({ orderBy: "name", tag: ["support", "cognitive"] }))).toEqual([
        "Alpha 1.0.0",
        "Alpha 2.0.0",
        "Gamma 1.0.0",
      ]);
      expect(keys(await list({ orderBy: "name desc", q: "customer" }))).toEqual([
        "Gamma 1.0.0",
        "Beta 2.0.0",
        "Alpha 2.0.0",
        "Alpha 1.0.0",
      ]);
    });
  });

  describe("page tokens", () => {
    /** Every page of `request` by tokens, `limit` at a time. */
    const walk = async (request: ListInit, limit: number) => {
      const seen: string[] = [];
      let token: string | undefined;
      for (let pages = 0; pages < 100; pages++) {
        const page = await list({ ...request, limit, ...(token === undefined ? {} : { pageToken: token }) });
        seen.push(...keys(page));
        token = page.nextPageToken;
        if (token === undefined) return seen;
      }
      throw new Error("the walk did not end");
    };

    it.each([
      ["createdAt", {}],
      ["createdAt desc", { orderBy: "createdAt desc" }],
      ["updatedAt", { orderBy: "updatedAt" }],
      ["name", { orderBy: "name" }],
      ["name desc", { orderBy: "name desc" }],
      ["a tag", { tag: ["support", "cognitive"] }],
      ["a tag by name", { tag: ["support", "cognitive"], orderBy: "name desc" }],
      ["q", { q: "customer" }],
      ["q by updatedAt", { q: "customer", orderBy: "updatedAt desc" }],
      ["status ALL", { status: ["ALL"] }],
    ])("walks %s one and two at a time, as one page lists it", async (_, request) => {
      const whole = keys(await list({ ...request, limit: 100 }));
      expect(whole.length).toBeGreaterThan(1);
      expect(await walk(request, 1)).toEqual(whole);
      expect(await walk(request, 2)).toEqual(whole);
    });

    it("gives a token on an offset page too, and none on the last page", async () => {
      const page = await list({ limit: 2, offset: 1 });
      expect(keys(page)).toEqual(["Beta 2.0.0", "Gamma 1.0.0"]);
      const next = await list({ limit: 2, pageToken: page.nextPageToken });
      expect(keys(next)).toEqual(["Delta 1.0.0", "Alpha 2.0.0"]);
      expect(next.nextPageToken).toBeUndefined();
      expect(next.total).toBe(5);
    });

    it("refuses a token with offset, with other filters, order or tenant, and a malformed one", async () => {
      const { nextPageToken } = await list({ limit: 1, tag: ["support"] });
      expect(nextPageToken).toBeDefined();
      const bad: Array<[ListInit, string]> = [
        [{ tag: ["support"], offset: 1, pageToken: nextPageToken }, tenant],
        [{ tag: ["cognitive"], pageToken: nextPageToken }, tenant],
        [{ tag: ["support"], orderBy: "name", pageToken: nextPageToken }, tenant],
        [{ tag: ["support"], status: ["ALL"], pageToken: nextPageToken }, tenant],
        [{ tag: ["support"], q: "customer", pageToken: nextPageToken }, tenant],
        [{ tag: ["support"], pageToken: nextPageToken }, "other"],
        [{ pageToken: "not a token" }, tenant],
        [{ pageToken: "eyJ4IjoxfQ" }, tenant],
        [{ pageToken: `${nextPageToken}x` }, tenant],
      ];
      for (const [request, inTenant] of bad) {
        const error = await errorOf(list(request, inTenant));
        expect(error.code, JSON.stringify(request)).toBe("INVALID_PAGE_TOKEN");
        expect(error.issues).toEqual([
          expect.objectContaining({ code: "INVALID_PAGE_TOKEN", field: "pageToken", path: "pageToken" }),
        ]);
      }
      // The page size may change along a walk.
      expect((await list({ limit: 5, tag: ["support"], pageToken: nextPageToken })).data).toHaveLength(1);
    });

    it("pages an agent's versions by token, newest first", async () => {
      const alpha = stored.get("Alpha 1.0.0")!;
      for (const version of ["3.0.0", "4.0.0"]) await upsert(agent({ name: "Alpha", version, skills: [{ id: "x" }] }));
      const versions = (init: object) =>
        service.listVersions(
          tenant,
          create(ListAgentDefinitionVersionsRequestSchema, { id: alpha.agent.referenceId, ...init }),
        );
      const first = await versions({ limit: 3 });
      expect([first.total, keys(first)]).toEqual([4, ["Alpha 4.0.0", "Alpha 3.0.0", "Alpha 2.0.0"]]);
      const second = await versions({ limit: 3, pageToken: first.nextPageToken });
      expect([second.total, keys(second), second.nextPageToken]).toEqual([4, ["Alpha 1.0.0"], undefined]);
      const gamma = stored.get("Gamma 1.0.0")!;
      const otherAgent = service.listVersions(
        tenant,
        create(ListAgentDefinitionVersionsRequestSchema, { id: gamma.id, pageToken: first.nextPageToken }),
      );
      expect((await errorOf(otherAgent)).code).toBe("INVALID_PAGE_TOKEN");
      expect((await errorOf(versions({ offset: 1, pageToken: first.nextPageToken }))).code).toBe("INVALID_PAGE_TOKEN");
      const { nextPageToken: listToken } = await list({ limit: 1 });
      expect((await errorOf(versions({ pageToken: listToken }))).code).toBe("INVALID_PAGE_TOKEN");
    });
  });

  describe("side tables", () => {
    /** The tenant's rows of `table` per group of `columns`, counted or (`counters`) summed over shards. */
    const groups = (table: string, columns: readonly string[], counters: boolean) =>
      groupCounts(raw.db, table, columns, { counters, where: { tenant } });
    const expectCountersExact = async () => {
      expect(await groups("definition_counts", ["status", "is_latest"], true)).toEqual(
        await groups("agent_definitions", ["status", "is_latest"], false),
      );
      const termColumns = ["kind", "value", "status", "is_latest"];
      const terms = await groups("definition_terms", termColumns, false);
      expect(Object.keys(terms).length).toBeGreaterThan(0);
      expect(await groups("definition_term_counts", termColumns, true)).toEqual(terms);
    };

    it("keeps the counters equal to the rows through inserts, updates, status changes and deletes", async () => {
      await expectCountersExact();
      const extra = await upsert(agent({ name: "Zeta", skills: [{ id: "z", tags: ["doomed"] }] }));
      await expectCountersExact();
      expect((await list({ tag: ["doomed"] })).total).toBe(1);
      // An update that moves a tag: the old value's counter goes down, the new one's up.
      await upsert(agent({ name: "Zeta", skills: [{ id: "z", tags: ["fated"] }] }));
      await expectCountersExact();
      expect([(await list({ tag: ["doomed"] })).total, (await list({ tag: ["fated"] })).total]).toEqual([0, 1]);
      await upsert(agent({ name: "Zeta", skills: [{ id: "z", tags: ["doomed"] }] }));
      await repo.write(tenant, async (tx) =>
        tx.setStatus([(await tx.findByIdForUpdate(extra.id))!], "DEACTIVATED", null),
      );
      await expectCountersExact();
      expect((await list({ tag: ["doomed"] })).total).toBe(0);
      expect((await list({ tag: ["doomed"], status: ["DEACTIVATED"] })).total).toBe(1);
      await raw.db("agent_definitions").where({ id: extra.id }).delete();
      await expectCountersExact();
      expect((await list({ tag: ["doomed"], status: ["ALL"] })).total).toBe(0);
      expect((await list({ q: "zeta", status: ["ALL"] })).total).toBe(0);
      expect(await raw.db("definition_terms").where({ value: "doomed" }).count({ n: "*" }).first()).toMatchObject({
        n: 0,
      });
    });

    it("indexes the definitions stored before the migration when it runs", async () => {
      const before = await list({ status: ["ALL"], tag: ["support", "cognitive", "integration"], limit: 100 });
      const config = { migrationSource, tableName: "knex_migrations" };
      // Down through every migration from 0009 (the side tables) on, the later ones included (0010 the term
      // counters, 0011 the size column...), then up again.
      const completed = async (): Promise<string[]> =>
        ((await raw.db.migrate.list(config)) as [{ name: string }[], unknown])[0].map((migration) => migration.name);
      while ((await completed()).some((name) => name.startsWith("0009"))) await raw.db.migrate.down(config);
      expect(await raw.db.schema.hasTable("definition_changes")).toBe(false);
      expect(await raw.db.schema.hasColumn("agent_definitions", "document_bytes")).toBe(false);
      expect(await raw.db.schema.hasTable("definition_term_counts")).toBe(false);
      expect(await raw.db.schema.hasTable("definition_terms")).toBe(false);
      // Delta far past Gamma, in Gamma's shard: the counters' backfill goes by ranges of seqs, and
      // both ranges must add into the same counter row (version 1.0.0, ACTIVE, latest, that shard).
      const seqOf = async (name: string) =>
        Number(
          ((await raw.db("agent_definitions").where({ tenant, name }).first("seq")) as { seq: number | string }).seq,
        );
      await raw
        .db("agent_definitions")
        .where({ tenant, name: "Delta" })
        .update({ seq: 1_000_000 + ((await seqOf("Gamma")) % 16) });
      await raw.db.migrate.latest(config);
      const after = await list({ status: ["ALL"], tag: ["support", "cognitive", "integration"], limit: 100 });
      expect(keys(after)).toEqual(keys(before));
      expect(after.total).toBe(before.total);
      expect(keys(await list({ q: "zebra" }))).toEqual(["Gamma 1.0.0"]);
      await expectCountersExact();
    });
  });
});
