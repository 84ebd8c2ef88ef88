/**
 * MariaDB's full-text text written after COMMIT (storage/search-text.ts): by
 * the time a write answers, its versions' texts are the new ones, tagged with
 * the revision they were made at; a late text of an earlier revision never
 * overwrites a later one; and a text that was never written (a process that
 * died after COMMIT, a statement that failed) is written again by the repair,
 * at the next start or soon after the failure. SQLite writes its text in the
 * transaction and has none of this.
 */
import { create } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ListAgentDefinitionsRequestSchema,
  UpdateAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { createRegistryService, type RegistryService } from "../../src/service/registry-service.js";
import { keepTextsStatement } from "../../src/storage/queries/search-index.js";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import type { Database } from "../../src/storage/run/connection.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { SearchTextKeeper } from "../../src/storage/search-text.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { testDatabases, useFreshDatabase } from "../support/databases.js";
import { definition, host, save } from "./fixtures.js";

const mariadb = testDatabases().find((db) => db.name === "mariadb");

/** A list of `q` by relevance: what waits for the process's texts (sql-repository.ts, search). */
const relevance = (q: string) => create(ListAgentDefinitionsRequestSchema, { q, orderBy: "relevance", limit: 10 });

interface TextRow {
  body: string;
  text_revision: number;
  mod_revision: number;
}

describe.skipIf(mariadb === undefined || mariadb.skip)("the full-text text after COMMIT, on mariadb", () => {
  const target = useFreshDatabase(mariadb!);
  let repo: AgentDefinitionRepository;
  let service: RegistryService;
  let raw: Database;

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    service = createRegistryService({ repository: repo, host });
    raw = await openDatabase(target());
  });

  afterAll(async () => {
    await repo?.close();
    await raw?.db.destroy();
  });

  async function textOf(id: string): Promise<TextRow | undefined> {
    const [rows] = (await raw.db.raw(
      "SELECT x.body, x.text_revision, d.mod_revision FROM agent_definitions d " +
        "LEFT JOIN definition_text x ON x.seq = d.seq WHERE d.id = ?",
      [id],
    )) as [Array<{ body: string | null; text_revision: number | string | null; mod_revision: number | string }>];
    const row = rows[0];
    if (row === undefined || row.body === null) return undefined;
    return { body: row.body, text_revision: Number(row.text_revision), mod_revision: Number(row.mod_revision) };
  }

  /** Waits (up to 10 s) for `check` to hold of the version's text; answers the text then. */
  async function until(id: string, check: (row: TextRow | undefined) => boolean): Promise<TextRow | undefined> {
    for (let tries = 0; tries < 200; tries++) {
      const row = await textOf(id);
      if (check(row)) return row;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return textOf(id);
  }

  it("holds the written version's text, at its revision, when a relevance search of the process answers", async () => {
    const { id } = (await save(repo, definition({ name: "Quokka", description: "Hops about" }))).stored;
    await service.list("default", relevance("quokka"));
    expect(await textOf(id)).toEqual({ body: expect.stringContaining("quokka"), text_revision: 1, mod_revision: 1 });

    await service.update(
      "default",
      create(UpdateAgentDefinitionRequestSchema, {
        id,
        agentCardAndTools: definition({ name: "Quokka", description: "Sleeps all day" }),
      }),
    );
    const found = await service.list("default", relevance("sleeps"));
    expect(found.data.map((stored) => stored.id)).toEqual([id]);
    const row = await textOf(id);
    expect(row?.body).toContain("sleeps");
    expect(row?.body).not.toContain("hops");
    expect(row?.text_revision).toBe(row?.mod_revision);
    expect(row?.text_revision).toBeGreaterThan(1);
  });

  it("keeps a later revision's text when an earlier one arrives after it", async () => {
    const { id } = (await save(repo, definition({ name: "Wombat", description: "Digs burrows" }))).stored;
    // The write's own text first (queued after its COMMIT; a relevance search of the process waits for it).
    await service.list("default", relevance("wombat"));
    const before = await textOf(id);
    expect(before?.text_revision).toBe(before?.mod_revision);
    await raw.db.raw(keepTextsStatement(1), ["default", id, "wombat newer", Number(before?.mod_revision) + 5]);
    await raw.db.raw(keepTextsStatement(1), ["default", id, "wombat older", Number(before?.mod_revision) + 2]);
    expect((await textOf(id))?.body).toBe("wombat newer");
  });

  it("writes again, at the next start, a text that never came or is older than its version", async () => {
    const missing = (await save(repo, definition({ name: "Numbat", description: "Eats termites" }))).stored.id;
    const stale = (await save(repo, definition({ name: "Bilby", description: "Long ears" }))).stored.id;
    await service.list("default", relevance("bilby"));
    // As if the process had died between COMMIT and the texts.
    await raw.db.raw("DELETE x FROM definition_text x JOIN agent_definitions d ON d.seq = x.seq WHERE d.id = ?", [
      missing,
    ]);
    await raw.db.raw(
      "UPDATE definition_text x JOIN agent_definitions d ON d.seq = x.seq SET x.body = 'old words', " +
        "x.text_revision = 0 WHERE d.id = ?",
      [stale],
    );
    expect(await textOf(missing)).toBeUndefined();

    const restarted = await createSqlRepository(target());
    try {
      const repaired = await until(missing, (row) => row !== undefined);
      expect(repaired?.body).toContain("numbat");
      expect(repaired?.text_revision).toBe(repaired?.mod_revision);
      const rewritten = await until(stale, (row) => row?.body !== "old words");
      expect(rewritten?.body).toContain("bilby");
      expect(rewritten?.text_revision).toBe(rewritten?.mod_revision);
    } finally {
      await restarted.close();
    }
  });

  it("repairs soon after a text's write failed, and says so in the log", async () => {
    const { id } = (await save(repo, definition({ name: "Dingo", description: "Howls at night" }))).stored;
    await service.list("default", relevance("dingo"));
    const { mod_revision } = (await textOf(id)) as TextRow;
    await raw.db.raw(
      "UPDATE definition_text x JOIN agent_definitions d ON d.seq = x.seq SET x.body = 'lost', " +
        "x.text_revision = 0 WHERE d.id = ?",
      [id],
    );
    const warnings: string[] = [];
    const keeper = new SearchTextKeeper(raw.db, { warn: (message) => warnings.push(message), info: () => {} });
    try {
      // A statement the database refuses (strict mode: no integer in a BIGINT column), as a lost one would fail.
      keeper.keep([{ tenant: "default", id, text: "dingo howls", revision: "not a number" as unknown as number }]);
      await keeper.flushed();
      expect(keeper.failures).toBe(1);
      expect(warnings).toEqual(["search texts not written after commit; they will be repaired"]);
      const repaired = await until(id, (row) => row?.body !== "lost");
      expect(repaired?.body).toContain("dingo");
      expect(repaired?.text_revision).toBe(mod_revision);
    } finally {
      await keeper.close();
    }
  });
});
