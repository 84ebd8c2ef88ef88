/**
 * `q` against a plain scan of the documents (issue 24): random texts and
 * queries (accents, case, punctuation, prefixes, several words) answer,
 * through the service on the real repository, exactly the definitions an
 * oracle finds by reading each definition's texts; on SQLite and MariaDB.
 *
 * The oracle is written apart from the production folding: the texts use a
 * small alphabet whose folding is spelled out by hand (`folded`), and words
 * are split at the punctuation the generator puts between them. Also: the
 * folding itself against hand-written expectations, words longer than the
 * value column, and the word counters against COUNT(*) after concurrent
 * creates, updates and status changes. orderBy=relevance answers the same
 * set, walked page by page.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  ListAgentDefinitionsRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { RegistryError } from "../../src/domain/errors.js";
import { searchWordsOf } from "../../src/domain/list-query.js";
import { createRegistryService, type RegistryService } from "../../src/service/registry-service.js";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import type { Database } from "../../src/storage/run/connection.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { groupCounts } from "../support/counters.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { fromJsonBytes, host } from "./fixtures.js";

/** Pieces of words: shared beginnings (prefixes match often), accents composed and decomposed, case. */
const syllables = ["ca", "fé", "FE", "e\u0301", "ré", "su", "pa", "yr", "ol", "ü", "Ü", "ñ", "N", "x", "7", "Ca"];
/** What goes between words. */
const separators = [" ", "-", ", ", "!", "/", ". ", " (", ") ", "_"];

/** The oracle's folding, by hand: each character of the alphabet to what it stands for. */
const folded: Record<string, string> = {
  a: "a",
  A: "a",
  c: "c",
  C: "c",
  e: "e",
  E: "e",
  é: "e",
  É: "e",
  "\u0301": "",
  f: "f",
  F: "f",
  i: "i",
  I: "i",
  l: "l",
  L: "l",
  m: "m",
  M: "m",
  n: "n",
  N: "n",
  ñ: "n",
  Ñ: "n",
  o: "o",
  O: "o",
  p: "p",
  P: "p",
  r: "r",
  R: "r",
  s: "s",
  S: "s",
  t: "t",
  T: "t",
  u: "u",
  U: "u",
  ü: "u",
  Ü: "u",
  x: "x",
  X: "x",
  y: "y",
  Y: "y",
  "0": "0",
  "1": "1",
  "2": "2",
  "3": "3",
  "4": "4",
  "5": "5",
  "6": "6",
  "7": "7",
  "8": "8",
  "9": "9",
};

/** The oracle's words of a text: split at anything outside the alphabet, folded by hand, 3 or more characters. */
function oracleWords(text: string): string[] {
  const words: string[] = [];
  let current = "";
  for (const c of [...text, " "]) {
    const f = folded[c];
    if (f !== undefined) current += f;
    else {
      if (current.length >= 3) words.push(current);
      current = "";
    }
  }
  return words;
}

const word = fc.array(fc.constantFrom(...syllables), { minLength: 1, maxLength: 4 }).map((parts) => parts.join(""));
const sentenceOf = (minLength: number) =>
  fc
    .array(fc.tuple(word, fc.constantFrom(...separators)), { minLength, maxLength: 5 })
    .map((pairs) => pairs.map(([w, s]) => w + s).join(""));
const sentence = sentenceOf(0);
/** For the texts the contract requires. */
const required = sentenceOf(1);

interface Texts {
  readonly name: string;
  readonly description: string;
  readonly overview: string;
  readonly skillName: string;
  readonly skillDescription: string;
  readonly tag: string;
  readonly toolName: string;
}
const texts: fc.Arbitrary<Texts> = fc.record({
  name: sentence,
  description: required,
  overview: sentence,
  skillName: required,
  skillDescription: required,
  tag: word,
  toolName: required,
});

/** A query: words typed, maybe cut (a beginning), in another case, with punctuation around. */
const query = fc
  .array(fc.tuple(word, fc.integer({ min: 1, max: 8 }), fc.boolean(), fc.constantFrom(...separators)), {
    minLength: 1,
    maxLength: 3,
  })
  .map((typed) =>
    typed
      .map(([w, keep, upper, separator]) => {
        const cut = [...w].slice(0, keep).join("");
        return (upper ? cut.toUpperCase() : cut) + separator;
      })
      .join(""),
  );

/** The definitions the oracle finds for `q` among `corpus` (indexes), or undefined when q has no word. */
function oracle(corpus: readonly Texts[], q: string): number[] | undefined {
  const asked = oracleWords(q);
  const last = asked.pop();
  if (last === undefined) return undefined;
  return corpus.flatMap((t, i) => {
    const words = [t.name, t.description, t.overview, t.skillName, t.skillDescription, t.tag, t.toolName].flatMap(
      oracleWords,
    );
    const found = asked.every((w) => words.includes(w)) && words.some((w) => w.startsWith(last));
    return found ? [i] : [];
  });
}

function definitionOf(t: Texts, key: string): MessageInitShape<typeof AgentDefinitionSchema> {
  // Names are refused with white space at either end (identifying-text.ts); trimmed, they hold the same words.
  return {
    // The key keeps each definition its own agent; its words (tim, N-digit numbers) are in the oracle's alphabet.
    name: `${t.name} tim${key}`.trim(),
    description: t.description,
    overview: t.overview,
    url: "https://agents.example.com/a",
    version: "1.0.0",
    provider: { id: "Provider=Acme" },
    skills: [{ id: "s", name: t.skillName.trim(), description: t.skillDescription, tags: [{ tag: t.tag }] }],
    hostConfig: [
      {
        skillId: "s",
        executionMode: { id: "Mode=Delegate" },
        hostResources: [{ toolName: t.toolName.trim(), description: "D" }],
      },
    ],
  };
}

describe("searchWordsOf: the folding", () => {
  it.each<[string, string[]]>([
    ["Café CAFE cafe\u0301", ["cafe", "cafe", "cafe"]],
    ["ÉCOLE-école", ["ecole", "ecole"]],
    ["ﬁle Ｆｕｌｌ", ["file", "full"]],
    ["İstanbul ℌello", ["istanbul", "hello"]],
    ["Straße Ångström naïve", ["straße", "angstrom", "naive"]],
    ["a of to abc ab1 x9y", ["abc", "ab1", "x9y"]],
    ["payroll,payrolls;PAYROLL_2024", ["payroll", "payrolls", "payroll", "2024"]],
    ["日本語 данные Ελληνικά", ["日本語", "данные", "ελληνικα"]],
  ])("%s → %j", (text, words) => {
    expect(searchWordsOf(text)).toEqual(words);
  });
});

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;
  let service: RegistryService;
  let raw: Database;

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    raw = await openDatabase(target());
    service = createRegistryService({ repository: repo, host });
  });
  afterAll(async () => {
    await repo?.close();
    await raw?.db.destroy();
  });

  const upsert = async (tenant: string, def: MessageInitShape<typeof AgentDefinitionSchema>) =>
    (await service.upsert(tenant, create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: def }))).stored;
  const list = (tenant: string, q: string, limit = 100) =>
    service.list(tenant, create(ListAgentDefinitionsRequestSchema, { q, limit }));
  /** The names of a walk by tokens, two a page, each page's total checked to be `total`. */
  async function walk(tenant: string, q: string, total: number, orderBy?: string): Promise<string[]> {
    const walked: string[] = [];
    let token: string | undefined;
    do {
      const part = await service.list(
        tenant,
        create(ListAgentDefinitionsRequestSchema, {
          q,
          limit: 2,
          ...(orderBy === undefined ? {} : { orderBy }),
          ...(token === undefined ? {} : { pageToken: token }),
        }),
      );
      expect(part.total).toBe(total);
      walked.push(...part.data.map((s) => fromJsonBytes(s).name));
      token = part.nextPageToken;
      if (walked.length > total) break;
    } while (token !== undefined && token !== "");
    return walked;
  }

  it("answers q exactly as a scan of the documents, for random texts and queries", async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(texts, { minLength: 3, maxLength: 8 }),
        fc.array(query, { minLength: 6, maxLength: 12 }),
        async (corpus, queries) => {
          run += 1;
          const tenant = `words-${run}`;
          await repo.createTenant(tenant, `W${run}-`);
          const names: string[] = [];
          for (const [i, t] of corpus.entries()) {
            const stored = await upsert(tenant, definitionOf(t, String(100 + i)));
            names.push(fromJsonBytes(stored).name);
          }
          for (const q of queries) {
            const expected = oracle(corpus, q);
            if (expected === undefined) {
              await expect(list(tenant, q)).rejects.toBeInstanceOf(RegistryError);
              continue;
            }
            const page = await list(tenant, q);
            expect({ q, names: page.data.map((s) => fromJsonBytes(s).name), total: page.total }).toEqual({
              q,
              names: expected.map((i) => names[i] ?? ""),
              total: expected.length,
            });
            // Page by page (two at a time) the walk answers the same, with the same total on every page.
            expect(await walk(tenant, q, expected.length)).toEqual(expected.map((i) => names[i] ?? ""));
            // orderBy=relevance: the same set and total in another order, and a walk by tokens answers it once.
            const rankedWalk = await walk(tenant, q, expected.length, "relevance");
            expect([...rankedWalk].sort()).toEqual(expected.map((i) => names[i] ?? "").sort());
          }
        },
      ),
      { numRuns: 10, seed: 24 },
    );
  }, 240_000);

  it("rewrites a definition's words: those it lost leave the index, those it gained enter, counters kept", async () => {
    const tenant = "words-rewritten";
    await repo.createTenant(tenant, "REWR-");
    // 240 words that all go: more than one statement removes on MariaDB (search-index.ts, rowsPerDelete).
    const lost = Array.from({ length: 240 }, (_, i) => `lost${i}word`).join(" ");
    const first = await upsert(tenant, definitionOf({ ...emptyTexts, overview: `keeper ${lost}` }, "1"));
    const other = await upsert(tenant, definitionOf({ ...emptyTexts, overview: "keeper lost7word" }, "2"));
    const rewritten = await upsert(tenant, definitionOf({ ...emptyTexts, overview: "keeper fresh gained" }, "1"));
    expect(rewritten.id).toBe(first.id);
    const ids = async (q: string) => (await list(tenant, q)).data.map((s) => s.id).sort();
    expect(await ids("lost7word")).toEqual([other.id]);
    expect(await ids("lost239word")).toEqual([]);
    expect(await ids("lost")).toEqual([other.id]);
    expect(await ids("fresh gained")).toEqual([first.id]);
    expect(await ids("keeper")).toEqual([first.id, other.id].sort());
    const words = (
      await raw
        .db("definition_terms as t")
        .join("agent_definitions as d", "d.seq", "t.seq")
        .where({ "d.tenant": tenant, "d.id": first.id, "t.kind": 10 })
        .select("t.value")
    ).map((r: { value: string }) => r.value);
    expect(words.filter((w) => w.startsWith("lost"))).toEqual([]);
    expect(words).toEqual(expect.arrayContaining(["keeper", "fresh", "gained"]));
    const columns = ["value", "status", "is_latest"];
    const counted = await groupCounts(raw.db, "definition_terms", columns, { where: { tenant, kind: 10 } });
    const counters = await groupCounts(raw.db, "definition_term_counts", columns, {
      counters: true,
      where: { tenant, kind: 10 },
    });
    expect(counters).toEqual(counted);
  });

  it("finds a word longer than the value column (255) by its first 255 code points, whole or begun", async () => {
    const tenant = "long-words";
    await repo.createTenant(tenant, "LONG-");
    const long = `${"é".repeat(200)}${"x".repeat(100)}`;
    const stored = await upsert(tenant, definitionOf({ ...emptyTexts, description: `${long} end` }, "1"));
    const other = await upsert(tenant, definitionOf({ ...emptyTexts, description: `${"e".repeat(255)}z` }, "2"));
    const ids = async (q: string) => (await list(tenant, q)).data.map((s) => s.id);
    // Folded and cut, both are "e" x 200 then "x" x 55 / "e" x 255: different words.
    expect(await ids(`${"E".repeat(200)}${"X".repeat(100)}`)).toEqual([stored.id]);
    expect(await ids(`${long} end`)).toEqual([stored.id]);
    expect(await ids("e".repeat(256))).toEqual([other.id]);
    expect(await ids("e".repeat(200))).toEqual([stored.id, other.id]);
  });

  it(
    "keeps the word counters equal to COUNT(*) of word terms after concurrent creates, updates and status " + "changes",
    async () => {
      const tenant = "words-busy";
      await repo.createTenant(tenant, "BUSY-");
      const base = (i: number, variant: string) =>
        definitionOf({ ...emptyTexts, description: `shared ${variant} cafe${i % 3}`, tag: `tag${i % 2}x` }, String(i));
      const created = await Promise.all(Array.from({ length: 12 }, (_, i) => upsert(tenant, base(i, "first"))));
      await Promise.all([
        ...created.slice(0, 6).map((_, i) => upsert(tenant, base(i, i % 2 === 0 ? "second" : "first"))),
        ...Array.from({ length: 6 }, (_, i) => upsert(tenant, base(100 + i, "third"))),
        ...created
          .slice(6)
          .map((s, i) =>
            repo.write(tenant, async (tx) =>
              tx.setStatus([(await tx.findByIdForUpdate(s.id))!], i % 2 === 0 ? "DEACTIVATED" : "DEPRECATED", null),
            ),
          ),
      ]);
      const columns = ["value", "status", "is_latest"];
      const counted = await groupCounts(raw.db, "definition_terms", columns, { where: { tenant, kind: 10 } });
      const counters = await groupCounts(raw.db, "definition_term_counts", columns, {
        counters: true,
        where: { tenant, kind: 10 },
      });
      expect(Object.keys(counted).length).toBeGreaterThan(5);
      expect(counters).toEqual(counted);
      expect((await list(tenant, "shared")).total).toBe(
        Number(
          (
            await raw
              .db("agent_definitions")
              .where({ tenant })
              .whereIn("status", ["ACTIVE", "DEPRECATED"])
              .count({ n: "*" })
              .first()
          )?.n,
        ),
      );
    },
  );
});

const emptyTexts: Texts = {
  name: "",
  description: "Described",
  overview: "",
  skillName: "Skill",
  skillDescription: "Does it",
  tag: "tag",
  toolName: "Tool",
};
