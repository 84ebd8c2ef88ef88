/**
 * A write makes its definition's search index once (issue 50): its
 * admission folds each searchable text into words, and its transaction, in
 * every attempt, writes the rows of that index. A 1 MB definition's write
 * made its terms four times on MySQL, and again in each attempt, each a
 * synchronous pass over ~90,000 words. Counted here at the folding itself
 * (list-query.ts's searchWordsOf and wordsOf, wrapped), through the service's
 * real upsert and update on the real repository, with the first attempt of
 * each write lost to a race; on SQLite and MariaDB.
 */
import { create } from "@bufbuild/protobuf";
import { afterAll, beforeAll, beforeEach, expect, it, vi } from "vitest";
import { type AgentDefinition, AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  ListAgentDefinitionsRequestSchema,
  UpdateAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import * as listQuery from "../../src/domain/list-query.js";
import { definitionIndexOf, searchableTextsOf } from "../../src/domain/search-terms.js";
import { createRegistryService } from "../../src/service/registry-service.js";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import { type Database, openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { host, save, withWriteHook } from "./fixtures.js";

vi.mock("../../src/domain/list-query.js", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../../src/domain/list-query.js")>();
  return { ...actual, searchWordsOf: vi.fn(actual.searchWordsOf), wordsOf: vi.fn(actual.wordsOf) };
});

/** A definition of several skills, each text its own words, so that every pass over them shows. */
function wordy(name: string, words: string): AgentDefinition {
  return create(AgentDefinitionSchema, {
    name,
    description: `Answers questions about ${words}.`,
    url: "https://agents.example.com/wordy",
    version: "1.0.0",
    provider: { id: "Provider=Acme" },
    skills: Array.from({ length: 5 }, (_, i) => ({
      id: `s${i}`,
      name: `Skill ${i}`,
      description: `Skill ${i} handles ${words} number ${i}.`,
      tags: [{ tag: `tag${i}` }],
    })),
  });
}

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repository: AgentDefinitionRepository;
  let raw: Database;
  /** The error of a lost race on this database: the repository rolls the attempt back and runs the work again. */
  const lostRace = () =>
    db.name === "sqlite"
      ? Object.assign(new Error("database is locked (a test's race)"), { code: "SQLITE_BUSY" })
      : Object.assign(new Error("Deadlock found (a test's race)"), { code: "ER_LOCK_DEADLOCK", errno: 1213 });

  beforeAll(async () => {
    repository = await createSqlRepository(target());
    raw = await openDatabase(target());
  });
  afterAll(async () => {
    await repository?.close();
    await raw?.db.destroy();
  });
  beforeEach(() => {
    vi.mocked(listQuery.searchWordsOf).mockClear();
    vi.mocked(listQuery.wordsOf).mockClear();
  });

  /**
   * The texts folded since the test began: how many searchWordsOf folded (the terms), and how many characters
   * wordsOf read (the full-text text: the parts one by one, or joined by spaces).
   */
  const folds = () => ({
    searchWordsOf: vi.mocked(listQuery.searchWordsOf).mock.calls.length,
    wordsOfCharacters: vi.mocked(listQuery.wordsOf).mock.calls.reduce((n, [text]) => n + text.length, 0),
  });
  /** folds() of a write that folded `def` once: each searchable text once, and its full-text parts once. */
  const foldedOnce = (def: AgentDefinition) => {
    // No host resources here: the full-text parts are all the searchable texts.
    const texts = searchableTextsOf(def);
    const characters = texts.reduce((n, text) => n + text.length, 0);
    return {
      searchWordsOf: texts.length,
      wordsOfCharacters: expect.toSatisfy((n: number) => n >= characters && n < characters + texts.length),
    };
  };

  /** The term rows and the full-text text stored for version `id` (MySQL's, once the process has written it). */
  const indexed = async (id: string) => {
    // A list by relevance waits for the process's texts (sql-repository.ts, search).
    await createRegistryService({ repository, host }).list(
      "default",
      create(ListAgentDefinitionsRequestSchema, { q: "skill", orderBy: "relevance", limit: 1 }),
    );
    const [{ seq }] = await raw.db("agent_definitions").where({ id }).select("seq");
    const terms = await raw.db("definition_terms").where({ seq }).count({ n: "*" });
    const [text] =
      db.name === "sqlite"
        ? await raw.db("definition_fts").where("rowid", seq).select("body")
        : await raw.db("definition_text").where({ seq }).select("body");
    return { terms: Number(terms[0]?.n), text: (text as { body?: string } | undefined)?.body };
  };

  it("folds each text of a new definition into words once, however many attempts its write takes", async () => {
    const def = wordy("Index Once", "invoices receipts ledgers");
    const saved = await save(repository, def, "default", {
      after: (call, attempt) => {
        if (call === "insert" && attempt === 1) throw lostRace();
      },
    });
    expect(saved.attempts).toBe(2);
    expect(folds()).toEqual(foldedOnce(def));
    // The rows are the index's.
    const index = definitionIndexOf(def);
    expect(await indexed(saved.stored.id)).toEqual({ terms: index.terms.length, text: index.text });
  });

  it("folds each text of an updated definition into words once, however many attempts its write takes", async () => {
    const { stored } = await save(repository, wordy("Index Once Updated", "invoices"));
    vi.mocked(listQuery.searchWordsOf).mockClear();
    vi.mocked(listQuery.wordsOf).mockClear();
    const def = wordy("Index Once Updated", "contracts and budgets");
    let attempts = 0;
    const service = createRegistryService({
      repository: withWriteHook(repository, (tx) => {
        const attempt = ++attempts;
        return new Proxy(tx, {
          get(target, property) {
            const value: unknown = Reflect.get(target, property, target);
            if (typeof value !== "function") return value;
            return async (...args: unknown[]) => {
              const result: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
              if (property === "update" && attempt === 1) throw lostRace();
              return result;
            };
          },
        });
      }),
      host,
    });
    await service.update(
      "default",
      create(UpdateAgentDefinitionRequestSchema, { id: stored.id, agentCardAndTools: def }),
      { mayReactivate: true },
    );
    expect(attempts).toBe(2);
    expect(folds()).toEqual(foldedOnce(def));
    const index = definitionIndexOf(def);
    expect(await indexed(stored.id)).toEqual({ terms: index.terms.length, text: index.text });
  });
});
