/**
 * SQLite's costly search statements off the event loop (sqlite-search-worker.ts,
 * run/searches.ts searchRunner): they run on worker threads with read-only
 * connections of their own, so the main connection answers reads while one
 * runs; the caller is answered at SEARCH_TIMEOUT_MS or when its signal
 * aborts; the pool serves the next statement after that, and close() ends
 * the workers. Also under Deno, whose worker runs `node:sqlite`.
 *
 * The slow statement counts the rows of a recursive CTE: deterministic, about
 * a second or more on these machines, and finite (an answered statement runs
 * on in its worker until it ends; the pool module says why).
 */
import { join } from "node:path";
import type { Knex } from "knex";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RegistryError } from "../../src/domain/errors.js";
import { unfilteredQuery } from "../../src/domain/list-query.js";
import { buildSearch } from "../../src/storage/queries/search.js";
import { SEARCH_ALIVE } from "../../src/storage/queries/sql-functions.js";
import type { AgentDefinitionRepository, StoredDefinition } from "../../src/storage/repository.js";
import { openDatabase, sqliteFileName } from "../../src/storage/run/connection.js";
import { type SearchRunner, searchRunner } from "../../src/storage/run/searches.js";
import {
  createSqliteSearchPool,
  SearchStatementTimeout,
  type SqliteSearchPool,
} from "../../src/storage/run/sqlite-search-worker.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { testDatabases, useFreshDatabase } from "../support/databases.js";
import { runDenoScript } from "../support/deno-script.js";
import { definition, save } from "./fixtures.js";

const sqlite = testDatabases()[0]!;

/** Counts `n` rows: about a second per 10,000,000 here, finite, and costly in the way a search is (not bounded). */
const slow = {
  sql: "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT COUNT(*) AS total FROM c",
  bindings: [20_000_000],
};

/**
 * A statement with the searches' cancellation point (SEARCH_ALIVE, called once per row as every
 * costly search calls it): without it, it would count for days.
 */
const endless = {
  sql:
    `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE ${SEARCH_ALIVE}() AND x < ?) SELECT ` +
    `COUNT(*) AS total FROM c`,
  bindings: [1e15],
};

/**
 * A statement that starts a pool's worker: the time limit counts from the
 * hand-over, a worker's start (loading the driver, opening the file) included.
 */
const warmUp = "SELECT 1 AS one";

/** Whether a promise has settled, without waiting for it. */
function tracked<T>(promise: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let settled = false;
  const watched = promise.finally(() => {
    settled = true;
  });
  watched.catch(() => undefined);
  return { promise: watched, settled: () => settled };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error("expected a rejection");
    },
    (error: unknown) => error,
  );
}

describe("SQLite searches on worker threads", () => {
  const target = useFreshDatabase(sqlite);
  let repository: AgentDefinitionRepository;
  let stored: StoredDefinition;
  /** A second knex instance on the same file, for runners with their own limits. */
  let db: Knex;
  const runners: SearchRunner[] = [];
  const pools: SqliteSearchPool[] = [];
  const runner = (limits: Parameters<typeof searchRunner>[2]) => {
    const made = searchRunner(db, "sqlite", limits);
    runners.push(made);
    return made;
  };
  const pool = (timeoutMs: number) => {
    const made = createSqliteSearchPool(join(target().dataDir, sqliteFileName), { workers: 1, timeoutMs });
    pools.push(made);
    return made;
  };

  beforeAll(async () => {
    repository = await createSqlRepository({ ...target(), search: { timeoutMs: 0 } });
    stored = (await save(repository, definition({ name: "Quasar Agent", description: "Finds quasars." }))).stored;
    ({ db } = await openDatabase(target()));
  });

  afterAll(async () => {
    await Promise.all([...runners, ...pools].map((r) => r.close()));
    await db?.destroy();
    await repository?.close();
  });

  it("answers a read by id on the main connection while a costly statement runs", async () => {
    const unlimited = runner({ timeoutMs: 0 });
    await unlimited(warmUp, [], { tenant: "default" });
    const search = tracked(unlimited(slow.sql, slow.bindings, { tenant: "default" }));
    const read = await repository.get("default", stored.id);
    expect(read?.id).toBe(stored.id);
    // The read was answered first: the statement did not hold the event loop.
    expect(search.settled()).toBe(false);
    expect(await search.promise).toEqual([{ total: slow.bindings[0] }]);
  });

  it("answers a keyword search's definitions with both encodings as Buffers, equal to a read by id's", async () => {
    const page = await repository.search("default", { ...unfilteredQuery(10, 0), words: ["quasar"] });
    expect(page.items.map((item) => item.id)).toEqual([stored.id]);
    const [found] = page.items;
    const read = await repository.get("default", stored.id);
    expect(Buffer.isBuffer(found?.json) && Buffer.isBuffer(found?.binary)).toBe(true);
    expect(Buffer.from(found!.json).equals(Buffer.from(read!.json))).toBe(true);
    expect(Buffer.from(found!.binary).equals(Buffer.from(read!.binary))).toBe(true);
  });

  it("answers UNAVAILABLE, without SQL, at SEARCH_TIMEOUT_MS", async () => {
    const limited = runner({ timeoutMs: 100 });
    await limited(warmUp, [], { tenant: "default" });
    const error = await rejection(limited(slow.sql, slow.bindings, { tenant: "default" }));
    expect(error).toBeInstanceOf(RegistryError);
    expect((error as RegistryError).code).toBe("UNAVAILABLE");
    expect((error as RegistryError).message).toMatch(
      /^The search took longer than the limit of 0\.1 seconds and was stopped; narrow it/,
    );
    expect((error as RegistryError).message).not.toMatch(/select|recursive/i);
  });

  it("stops a search whose caller leaves, through the runner: its signal reaches the worker", async () => {
    const unlimited = runner({ timeoutMs: 0, sqliteWorkers: 1 });
    await unlimited(warmUp, [], { tenant: "default" });
    const leaving = new AbortController();
    const abandoned = unlimited(endless.sql, endless.bindings, { tenant: "default", signal: leaving.signal });
    expect((await repository.get("default", stored.id))?.id).toBe(stored.id);
    leaving.abort(new Error("the client went away"));
    await expect(abandoned).rejects.toThrow("the client went away");
    // The one worker serves the next search: the abandoned one was stopped, not left to run.
    expect(await unlimited("SELECT 1 AS one", [], { tenant: "other" })).toEqual([{ one: 1 }]);
  });

  it("gives a statement what is left of its search's budget, not a limit of its own", async () => {
    // An hour per statement, but the search's deadline is near: the statement gets what is left of it.
    const hourly = runner({ timeoutMs: 3_600_000 });
    await hourly(warmUp, [], { tenant: "default" });
    const error = await rejection(
      hourly(endless.sql, endless.bindings, { tenant: "default", deadline: Date.now() + 200 }),
    );
    expect(error).toMatchObject({
      code: "UNAVAILABLE",
      message: expect.stringMatching(/^The search took longer than the limit/),
    });
  });

  it(
    "stops a statement at its time limit where it calls the cancellation point, so its worker serves the " + "next",
    async () => {
      const searches = pool(200);
      await searches.run(warmUp, []);
      await expect(searches.run(endless.sql, endless.bindings)).rejects.toBeInstanceOf(SearchStatementTimeout);
      // The one worker is free again: were the statement still counting, this would time out behind it.
      expect(await searches.run("SELECT 1 AS one", [])).toEqual([{ one: 1 }]);
    },
  );

  it("stops a statement whose caller left (its signal aborted), so its worker serves the next", async () => {
    const searches = pool(0);
    await searches.run(warmUp, []);
    const leaving = new AbortController();
    const abandoned = searches.run(endless.sql, endless.bindings, leaving.signal);
    // The read by id is answered while the statement runs: then the caller leaves.
    expect((await repository.get("default", stored.id))?.id).toBe(stored.id);
    leaving.abort(new Error("the client went away"));
    await expect(abandoned).rejects.toThrow("the client went away");
    // No time limit: without the stop, this would wait for days behind the abandoned statement.
    expect(await searches.run("SELECT 1 AS one", [])).toEqual([{ one: 1 }]);
  });

  it(
    "stops the service's own costly statements: a keyword search calls the cancellation point per candidate " + "row",
    async () => {
      const page = await repository.search("default", { ...unfilteredQuery(10, 0), words: [], prefix: "quas" });
      expect(page.total).toBe(1);
      const { sql } = buildSearch(
        "sqlite",
        "default",
        { ...unfilteredQuery(10, 0), words: ["quasar", "pulsar"] },
        4 * 1024 * 1024,
      );
      expect(sql.match(new RegExp(`${SEARCH_ALIVE}\\(\\)`, "g"))?.length).toBeGreaterThanOrEqual(2);
    },
  );

  it(
    "counts the time limit from the hand-over: a statement without the cancellation point runs on after its " +
      "caller is answered, and one waiting behind it is answered at its limit too",
    async () => {
      const searches = pool(200);
      await searches.run(warmUp, []);
      await expect(searches.run(slow.sql, slow.bindings)).rejects.toBeInstanceOf(SearchStatementTimeout);
      // The one worker is still counting: this one never gets it within its limit.
      await expect(searches.run("SELECT 1 AS one", [])).rejects.toBeInstanceOf(SearchStatementTimeout);
    },
  );

  it(
    "answers a statement whose signal aborts with the signal's reason, running or waiting, and serves the " + "next",
    async () => {
      const searches = pool(0);
      await searches.run(warmUp, []);
      const running = new AbortController();
      const waiting = new AbortController();
      // With the searches' cancellation point, as every costly search has it: the abort stops the first at its
      // next row, so the next statement is served at once. (Without it the worker would go on counting after its
      // caller is answered, and the last statement here would wait for that: 20 million rows took over 30 s
      // on a machine with a load average of 12.)
      const first = searches.run(endless.sql, endless.bindings, running.signal);
      const second = searches.run(endless.sql, endless.bindings, waiting.signal);
      // The read by id is answered while the first runs (and the second waits for the one worker).
      expect((await repository.get("default", stored.id))?.id).toBe(stored.id);
      running.abort(new Error("the client went away"));
      waiting.abort(new Error("this one too"));
      await expect(first).rejects.toThrow("the client went away");
      await expect(second).rejects.toThrow("this one too");
      await expect(searches.run("SELECT 1 AS one", [], AbortSignal.abort(new Error("already gone")))).rejects.toThrow(
        "already gone",
      );
      expect(await searches.run("SELECT COUNT(*) AS total FROM agent_definitions", [])).toEqual([{ total: 1 }]);
    },
  );

  it(
    "close() ends the workers, a busy one included, answers what runs UNAVAILABLE and refuses later " + "statements",
    async () => {
      const searches = pool(0);
      expect(await searches.run("SELECT 1 AS one", [])).toEqual([{ one: 1 }]);
      const running = searches.run(slow.sql, slow.bindings);
      const closed = await searches.close().then(() => "closed");
      expect(closed).toBe("closed");
      expect(await rejection(running)).toMatchObject({ code: "UNAVAILABLE" });
      expect(await rejection(searches.run("SELECT 1 AS one", []))).toMatchObject({ code: "UNAVAILABLE" });
    },
  );

  it("answers an SQLite error of the statement as the driver's error, with its code", async () => {
    const error = await rejection(pool(0).run("SELECT * FROM no_such_table", []));
    expect(error).toMatchObject({ code: "SQLITE_ERROR", message: expect.stringContaining("no_such_table") });
  });
});

describe("SQLite searches on worker threads under Deno", () => {
  const target = useFreshDatabase(sqlite);

  beforeAll(async () => {
    // The schema and one definition, written by Node; the Deno script reads them with node:sqlite.
    const repository = await createSqlRepository(target());
    await save(repository, definition({ name: "Quasar Agent" }));
    await repository.close();
  });

  it("answers the main thread while a statement runs on a worker, answers at the time limit and on abort, and " +
    "serves the next", async () => {
    const answer = await runDenoScript("test/storage/sqlite-search-worker.deno.ts", target().dataDir, [
      join(target().dataDir, sqliteFileName),
    ]);
    expect(answer).toEqual({
      deno: true,
      readAnsweredFirst: true,
      slowTotal: slow.bindings[0],
      timedOut: "SearchStatementTimeout",
      aborted: "gone",
      next: [{ total: 1 }],
      endlessStopped: "SearchStatementTimeout",
      afterStop: [{ one: 1 }],
      bytes: true,
    });
  }, 180_000);
});
