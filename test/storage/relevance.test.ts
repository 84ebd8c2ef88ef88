/**
 * orderBy=relevance (issue 24): the matches of `q` ranked by the databases'
 * full-text score, through the real service on the real repository (SQLite
 * and MariaDB). Pins that the set and total are exactly `q`'s, that a walk by
 * page tokens answers each match once in the order of one long page, that a
 * definition with the word in more fields ranks ahead of one that has it
 * once, that the order needs `q`, and that it waits at the search gate.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  ListAgentDefinitionsRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { RegistryError } from "../../src/domain/errors.js";
import { parseListQuery } from "../../src/domain/list-query.js";
import { createRegistryService, type RegistryService } from "../../src/service/registry-service.js";
import { isBounded, resolveWords } from "../../src/storage/queries/search.js";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { listRequestParts } from "../support/list-request-parts.js";
import { fromJsonBytes, host } from "./fixtures.js";

interface Texts {
  readonly description: string;
  readonly skillName?: string;
  readonly skillDescription?: string;
  readonly tag?: string;
  readonly toolName?: string;
}

function definitionOf(name: string, t: Texts): MessageInitShape<typeof AgentDefinitionSchema> {
  return {
    name,
    description: t.description,
    url: "https://agents.example.com/a",
    version: "1.0.0",
    provider: { id: "Provider=Acme" },
    skills: [
      {
        id: "s",
        name: t.skillName ?? "Helper",
        description: t.skillDescription ?? "Helps out",
        tags: [{ tag: t.tag ?? "misc" }],
      },
    ],
    hostConfig: [
      {
        skillId: "s",
        executionMode: { id: "Mode=Delegate" },
        hostResources: [{ toolName: t.toolName ?? "tool", description: "D" }],
      },
    ],
  };
}

const listRequest = (init: MessageInitShape<typeof ListAgentDefinitionsRequestSchema>) =>
  create(ListAgentDefinitionsRequestSchema, init);

describe("orderBy=relevance as a query", () => {
  it("is refused without q, naming orderBy; and never descending", () => {
    for (const parts of [{}, { q: "" }, { q: "   " }]) {
      const error = catchError(() =>
        parseListQuery("t", listRequestParts({ limit: 10, ...parts, orderBy: "relevance" })),
      );
      expect(error.code).toBe("VALIDATION_FAILED");
      expect(error.issues).toEqual([expect.objectContaining({ field: "orderBy" })]);
    }
    const desc = catchError(() =>
      parseListQuery("t", listRequestParts({ limit: 10, q: "invoice", orderBy: "relevance desc" })),
    );
    expect(desc.issues).toEqual([expect.objectContaining({ field: "orderBy" })]);
  });

  it("waits at the search gate where the same q in creation order does not", () => {
    // The plan found one word of the tenant that begins with "invoice": one index range and its counters.
    const plan = { counts: new Map<string, number>(), vocabulary: [{ word: "invoice", count: 2 }] };
    const plain = resolveWords(parseListQuery("t", listRequestParts({ limit: 10, q: "invoice" })), plan);
    const ranked = resolveWords(
      parseListQuery("t", listRequestParts({ limit: 10, q: "invoice", orderBy: "relevance" })),
      plan,
    );
    expect(isBounded(plain)).toBe(true);
    expect(isBounded(ranked)).toBe(false);
  });
});

function catchError(run: () => unknown): RegistryError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(RegistryError);
    return error as RegistryError;
  }
  throw new Error("expected a RegistryError");
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

  const upsert = (tenant: string, name: string, t: Texts) =>
    service.upsert(tenant, create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: definitionOf(name, t) }));
  const names = (page: { data: readonly Parameters<typeof fromJsonBytes>[0][] }) =>
    page.data.map((s) => fromJsonBytes(s).name);

  /** Every page of a walk by tokens, `limit` at a time, with each page's total. */
  async function walk(tenant: string, init: MessageInitShape<typeof ListAgentDefinitionsRequestSchema>, limit: number) {
    const walked: string[] = [];
    const totals: number[] = [];
    let token: string | undefined;
    do {
      const page = await service.list(
        tenant,
        listRequest({ ...init, limit, ...(token === undefined ? {} : { pageToken: token }) }),
      );
      walked.push(...names(page));
      totals.push(page.total);
      token = page.nextPageToken;
      if (walked.length > 1_000) throw new Error("the walk does not end");
    } while (token !== undefined && token !== "");
    return { walked, totals };
  }

  it("ranks a definition with the word in its name and several fields ahead of one that has it once", async () => {
    const tenant = "ranked";
    await repo.createTenant(tenant, "RANK-");
    // Definitions without the word: a full-text score weighs a word by how rare it is in the table.
    for (let i = 0; i < 8; i++) await upsert(tenant, `Filler ${i}`, { description: "Keeps the ledger tidy" });
    const once = await upsert(tenant, "Once", { description: "Reads one invoice and files it" });
    const many = await upsert(tenant, "Invoice Many", {
      description: "Checks every invoice total",
      skillName: "Invoice check",
      skillDescription: "Reads the invoice lines",
      tag: "invoice",
    });
    const ids = async (init: MessageInitShape<typeof ListAgentDefinitionsRequestSchema>) =>
      (await service.list(tenant, listRequest({ limit: 10, ...init }))).data.map((s) => s.id);
    // The default order stays creation; relevance puts the many-field match first.
    expect(await ids({ q: "invoice" })).toEqual([once.stored.id, many.stored.id]);
    expect(await ids({ q: "invoice", orderBy: "relevance" })).toEqual([many.stored.id, once.stored.id]);
    // A last word typed partly ranks the same way.
    expect(await ids({ q: "invoi", orderBy: "relevance" })).toEqual([many.stored.id, once.stored.id]);
  });

  describe("a tenant of reports", () => {
    const tenant = "reports";
    beforeAll(async () => {
      await repo.createTenant(tenant, "REP-");
      await repo.createTenant("elsewhere", "ELSE-");
      const texts: Array<[string, Texts]> = [
        ["Weekly", { description: "Writes the weekly report", tag: "report" }],
        ["Tally", { description: "Counts the report lines" }],
        ["Digest", { description: "Mails a weekly report digest", skillName: "Report mailer" }],
        ["Twin A", { description: "Counts the report lines" }],
        ["Twin B", { description: "Counts the report lines" }],
        ["Reporting", { description: "Reporting on reports, report after report", tag: "reporting" }],
        ["Repository", { description: "Keeps a repository of files" }],
        ["Tooled", { description: "Runs a single tool", toolName: "report" }],
        ["Weekly only", { description: "Runs every weekly cycle" }],
        ["Repeat", { description: "Repeats the weekly report, the weekly report again" }],
        ["Unrelated", { description: "Sorts the mail" }],
        ["Twin C", { description: "Counts the report lines" }],
      ];
      for (const [name, t] of texts) await upsert(tenant, name, t);
      await upsert("elsewhere", "Elsewhere", { description: "The weekly report of another tenant" });
    });

    it.each([["report"], ["rep"], ["reports"], ["weekly rep"], ["report weekly"], ["counts"], ["nothing"]])(
      "q=%s: the set and total of q, each match once in a walk by tokens",
      async (q) => {
        const plain = await service.list(tenant, listRequest({ q, limit: 100 }));
        const ranked = await service.list(tenant, listRequest({ q, limit: 100, orderBy: "relevance" }));
        expect(ranked.total).toBe(plain.total);
        expect([...names(ranked)].sort()).toEqual([...names(plain)].sort());
        for (const limit of [1, 2, 5]) {
          const { walked, totals } = await walk(tenant, { q, orderBy: "relevance" }, limit);
          expect(walked).toEqual(names(ranked));
          expect(new Set(totals)).toEqual(new Set([plain.total]));
        }
        // Offset pages are cut from the same order.
        const second = await service.list(tenant, listRequest({ q, limit: 2, offset: 2, orderBy: "relevance" }));
        expect(names(second)).toEqual(names(ranked).slice(2, 4));
      },
    );

    it("ranks equal texts by creation, and a match only the term index has (a tool name) last", async () => {
      const ranked = names(await service.list(tenant, listRequest({ q: "report", limit: 100, orderBy: "relevance" })));
      const twins = ranked.filter((n) => n.startsWith("Twin"));
      expect(twins).toEqual(["Twin A", "Twin B", "Twin C"]);
      expect(ranked.indexOf("Twin B")).toBe(ranked.indexOf("Twin A") + 1);
      expect(ranked.at(-1)).toBe("Tooled");
    });

    it("refuses a token of q in creation order for relevance, and the reverse", async () => {
      const plain = await service.list(tenant, listRequest({ q: "report", limit: 1 }));
      await expect(
        service.list(
          tenant,
          listRequest({ q: "report", limit: 1, orderBy: "relevance", pageToken: plain.nextPageToken }),
        ),
      ).rejects.toMatchObject({ code: "INVALID_PAGE_TOKEN" });
      const ranked = await service.list(tenant, listRequest({ q: "report", limit: 1, orderBy: "relevance" }));
      await expect(
        service.list(tenant, listRequest({ q: "report", limit: 1, pageToken: ranked.nextPageToken })),
      ).rejects.toMatchObject({ code: "INVALID_PAGE_TOKEN" });
    });
  });
});
