/**
 * The limits of the list's searches (run/searches.ts searchRunner): at most
 * SEARCH_MAX_CONCURRENT search statements on the database at once, the others
 * waiting in line without a connection, so reads and writes keep theirs; and
 * SEARCH_TIMEOUT_MS, after which the server stops a search statement and the
 * caller gets UNAVAILABLE with a message that says so, never the SQL.
 *
 * On MariaDB a second session's `LOCK TABLES definition_terms WRITE` holds
 * every search filtered by tag at the server (waiting on the table's metadata
 * lock) while a read by id, which does not touch that table, goes through.
 */
import { create } from "@bufbuild/protobuf";
import type { Connection } from "mysql2/promise";
import { createConnection } from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { UpsertAgentDefinitionRequestSchema } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { errorBody, RegistryError } from "../../src/domain/errors.js";
import type { ListQuery } from "../../src/domain/list-query.js";
import { unfilteredQuery } from "../../src/domain/list-query.js";
import { createRegistryService } from "../../src/service/registry-service.js";
import { isBounded } from "../../src/storage/queries/search.js";
import type { AgentDefinitionRepository, ListResult, StoredDefinition } from "../../src/storage/repository.js";
import { classifyDriverError, isStatementTimeout } from "../../src/storage/run/driver-errors.js";
import { Gate } from "../../src/storage/run/search-gate.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { mysqlConnectionOptions } from "../support/mysql-url.js";
import { host } from "./fixtures.js";

const tenant = "default";
const otherTenant = "other";

/** Definitions of one tag, and one without it. */
const tagged = ["Able", "Baker", "Charlie"];

function definitionNamed(name: string, tag: string) {
  return create(AgentDefinitionSchema, {
    name,
    description: "An agent.",
    url: "https://agents.example.com/a",
    version: "1.0.0",
    provider: { id: "Provider=Acme" },
    skills: [{ id: "s", name: "S", description: "Does it.", tags: [{ tag }] }],
  });
}

/** A search the gate holds: filtered and ordered by name, it reads every match (queries/search.ts isBounded). */
const byTag: ListQuery = {
  ...unfilteredQuery(100, 0),
  terms: [{ kind: "tag", values: ["gated"] }],
  order: { key: "name", descending: false },
};
/** The same filter in creation order: an index range of about a page and a total from the counters, never gated. */
const byTagBounded: ListQuery = { ...byTag, order: { key: "createdAt", descending: false } };

/** Polls `check` until it holds; fails after 15 s (a bound on the wait, not a timing assertion). */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`Gave up waiting until ${what}.`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Whether a promise has settled, without waiting for it. */
function tracked<T>(promise: Promise<T>): { promise: Promise<T>; settled: () => boolean } {
  let settled = false;
  const watched = promise.finally(() => {
    settled = true;
  });
  // The test awaits it later; keep an early rejection from counting as unhandled.
  watched.catch(() => undefined);
  return { promise: watched, settled: () => settled };
}

describe("Gate", () => {
  it(
    "lets `limit` holders in, queues the rest first come first served, and hands each released slot to the first " +
      "in line",
    async () => {
      const gate = new Gate(2);
      expect(gate.tryTake("t")).toBe(true);
      await gate.take("t");
      expect(gate.tryTake("t")).toBe(false);
      const order: number[] = [];
      const waiters = [1, 2, 3].map((n) => gate.take("t").then(() => order.push(n)));
      expect(gate.waiting).toBe(3);
      gate.release("t");
      await waiters[0];
      expect(order).toEqual([1]);
      // A newcomer does not overtake the line.
      expect(gate.tryTake("t")).toBe(false);
      gate.release("t");
      gate.release("t");
      await Promise.all(waiters);
      expect(order).toEqual([1, 2, 3]);
      expect(gate.waiting).toBe(0);
      gate.release("t");
      gate.release("t");
      expect(gate.tryTake("t")).toBe(true);
      expect(gate.tryTake("t")).toBe(true);
      expect(gate.tryTake("t")).toBe(false);
    },
  );

  it("takes a waiter whose signal aborts out of the line, with the signal's reason", async () => {
    const gate = new Gate(1);
    expect(gate.tryTake("t")).toBe(true);
    const leaving = new AbortController();
    const first = gate.take("t", leaving.signal);
    const second = gate.take("t");
    expect(gate.waiting).toBe(2);
    leaving.abort(new Error("caller went away"));
    await expect(first).rejects.toThrow("caller went away");
    expect(gate.waiting).toBe(1);
    gate.release("t");
    await second;
    expect(gate.waiting).toBe(0);
    await expect(gate.take("t", AbortSignal.abort(new Error("already gone")))).rejects.toThrow("already gone");
    expect(gate.waiting).toBe(0);
  });

  it("holds one tenant to its own limit while slots are free, and lets another tenant in", () => {
    const gate = new Gate(4, 2);
    expect([gate.tryTake("a"), gate.tryTake("a"), gate.tryTake("a")]).toEqual([true, true, false]);
    expect([gate.tryTake("b"), gate.tryTake("b")]).toEqual([true, true]);
    expect(gate.tryTake("c")).toBe(false);
    expect([gate.held("a"), gate.held("b"), gate.held("c")]).toEqual([2, 2, 0]);
  });

  it("admits another tenant's search before the queued searches of a tenant at its limit", async () => {
    const gate = new Gate(2, 1);
    const admitted: string[] = [];
    const enter = (name: string) => gate.take(name.slice(0, 1)).then(() => admitted.push(name));
    expect(gate.tryTake("a")).toBe(true);
    const queued = ["a1", "a2"].map(enter);
    // A slot is free, but tenant a holds all it may: b's search takes the slot though a's came first.
    await enter("b1");
    expect(admitted).toEqual(["b1"]);
    expect(gate.waiting).toBe(2);
    gate.release("a");
    await queued[0];
    gate.release("a");
    await queued[1];
    expect(admitted).toEqual(["b1", "a1", "a2"]);
  });

  it("hands freed slots round-robin between the tenants in line, whatever each one queued", async () => {
    const gate = new Gate(1, 1);
    const admitted: string[] = [];
    expect(gate.tryTake("a")).toBe(true);
    const waiters = ["a1", "a2", "a3", "b1", "c1", "b2"].map((name) =>
      gate.take(name.slice(0, 1)).then(() => admitted.push(name)),
    );
    while (admitted.length < waiters.length) {
      const before = admitted.length;
      gate.release(admitted.at(-1)?.slice(0, 1) ?? "a");
      await vi.waitFor(() => expect(admitted.length).toBe(before + 1));
    }
    expect(admitted).toEqual(["a1", "b1", "c1", "a2", "b2", "a3"]);
    expect(gate.waiting).toBe(0);
  });
});

describe("isBounded: which searches pass the gate", () => {
  const plain = unfilteredQuery(20, 0);
  const tag = { kind: "tag", values: ["x"] } as const;
  it.each<[string, ListQuery, boolean]>([
    ["the unfiltered list", plain, true],
    ["the unfiltered list by name", { ...plain, order: { key: "name", descending: true } }, true],
    ["the unfiltered list, latest only", { ...plain, latest: true }, true],
    ["one tag, in creation order", { ...plain, terms: [tag] }, true],
    ["two providers (one each, counted)", { ...plain, terms: [{ kind: "provider", values: ["a", "b"] }] }, true],
    [
      "two tags (a definition may carry both: counted one by one)",
      { ...plain, terms: [{ kind: "tag", values: ["x", "y"] }] },
      false,
    ],
    [
      "one tag by name (sorts every match)",
      { ...plain, terms: [tag], order: { key: "name", descending: false } },
      false,
    ],
    ["two filters", { ...plain, terms: [tag, { kind: "provider", values: ["a"] }] }, false],
    ["one whole word of q (a term like a tag)", { ...plain, words: ["quasar"] }, true],
    [
      "one word of q by name (sorts every match)",
      { ...plain, words: ["quasar"], order: { key: "name", descending: false } },
      false,
    ],
    ["two words of q (probes every match of one)", { ...plain, words: ["quasar", "pulsar"] }, false],
    ["the last word of q, not resolved (a range of words)", { ...plain, words: [], prefix: "quas" }, false],
    ["a word of q and a tag", { ...plain, words: ["quasar"], terms: [tag] }, false],
    ["updatedSince", { ...plain, updatedSince: new Date(0) }, false],
    ["DEACTIVATED alone (may skip most of the tenant)", { ...plain, statuses: ["DEACTIVATED"] }, false],
    ["every status", { ...plain, statuses: ["ACTIVE", "DEPRECATED", "DEACTIVATED"] }, true],
  ])("%s: %s", (_, query, bounded) => {
    expect(isBounded(query)).toBe(bounded);
  });
});

describe("isStatementTimeout", () => {
  it(
    "knows MariaDB's max_statement_time (1969) and MySQL's MAX_EXECUTION_TIME (3024), also wrapped, and nothing " +
      "else",
    () => {
      const mariadb = Object.assign(new Error("Query execution was interrupted (max_statement_time exceeded)"), {
        errno: 1969,
        sqlState: "70100",
      });
      const mysql = Object.assign(new Error("maximum statement execution time exceeded"), {
        code: "ER_QUERY_TIMEOUT",
        errno: 3024,
      });
      for (const error of [mariadb, mysql, new Error("knex", { cause: mysql })]) {
        expect(isStatementTimeout(error)).toBe(true);
        // Elsewhere than a search (a server-wide limit), such an error is the database failing us, not a bug.
        expect(classifyDriverError(error)).toBe("unavailable");
      }
      expect(
        isStatementTimeout(Object.assign(new Error("killed"), { code: "ER_QUERY_INTERRUPTED", errno: 1317 })),
      ).toBe(false);
      expect(isStatementTimeout(new Error("x"))).toBe(false);
    },
  );
});

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  /** Two searches at once, no time limit. */
  let gated: AgentDefinitionRepository;
  /** A 200 ms time limit. */
  let limited: AgentDefinitionRepository;
  const stored: StoredDefinition[] = [];
  let other: StoredDefinition;

  beforeAll(async () => {
    gated = await createSqlRepository({
      ...target(),
      timeoutMs: 30_000,
      search: { maxConcurrent: 2, timeoutMs: 0 },
    });
    limited = await createSqlRepository({
      ...target(),
      timeoutMs: 30_000,
      search: { maxConcurrent: 2, timeoutMs: 200 },
    });
    const service = createRegistryService({ repository: gated, host });
    const upsert = async (name: string, tag: string) =>
      (
        await service.upsert(
          tenant,
          create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: definitionNamed(name, tag) }),
        )
      ).stored;
    for (const name of tagged) stored.push(await upsert(name, "gated"));
    other = await upsert("Dog", "other");
    // A second tenant with the same tag, for the gate's lines per tenant.
    await gated.createTenant(otherTenant, "OTHER-");
    await service.upsert(
      otherTenant,
      create(UpsertAgentDefinitionRequestSchema, { agentCardAndTools: definitionNamed("Easy", "gated") }),
    );
  });

  afterAll(async () => {
    await gated?.close();
    await limited?.close();
  });

  const expectTagged = (page: ListResult) => {
    expect(page.total).toBe(tagged.length);
    expect(page.items.map((d) => d.id)).toEqual(stored.map((d) => d.id));
  };

  it("answers more concurrent searches than it lets run at once, each correctly", async () => {
    const pages = await Promise.all(Array.from({ length: 7 }, () => gated.search(tenant, byTag)));
    for (const page of pages) expectTagged(page);
    expectTagged(await limited.search(tenant, byTag));
  });

  // MariaDB only (LOCK TABLES from a second session); declared only there, so no run counts it as skipped.
  if (db.name === "mariadb")
    describe("with the searches' table locked by another session", () => {
      let locker: Connection;

      beforeAll(async () => {
        const url = target().databaseUrl;
        if (url === undefined) throw new Error("The MariaDB suite needs a database URL.");
        locker = await createConnection(mysqlConnectionOptions(url));
      });

      afterAll(async () => {
        await locker?.query("UNLOCK TABLES").catch(() => undefined);
        await locker?.end();
      });

      /** Statements of this database that wait for definition_terms' metadata lock. */
      const waitingAtServer = async (): Promise<number> => {
        const [rows] = await locker.query(
          "SELECT COUNT(*) AS n FROM information_schema.processlist WHERE db = DATABASE() AND id <> " +
            "CONNECTION_ID() AND state = 'Waiting for table metadata lock' AND info LIKE '%definition_terms%'",
        );
        return Number((rows as Array<{ n: number | string }>)[0]?.n ?? 0);
      };

      it(
        "lets SEARCH_MAX_CONCURRENT searches reach the server and queues the others without a connection, while a " +
          "read by id goes through",
        async () => {
          await locker.query("LOCK TABLES definition_terms WRITE");
          let searches: Array<ReturnType<typeof tracked<ListResult>>> = [];
          try {
            searches = [1, 2, 3].map(() => tracked(gated.search(tenant, byTag)));
            await until("two searches wait at the server", async () => (await waitingAtServer()) >= 2);
            // The third holds no pooled connection: it waits in the gate, not in the pool or at the server.
            expect(gated.poolStats()).toMatchObject({ used: 2, pendingAcquires: 0 });
            // Reads that do not touch the locked table are not held up by the searches.
            const read = await gated.get(tenant, other.id);
            expect(read?.id).toBe(other.id);
            expect(await waitingAtServer()).toBe(2);
            expect(gated.poolStats()).toMatchObject({ used: 2, pendingAcquires: 0 });
            expect(searches.map((s) => s.settled())).toEqual([false, false, false]);
            // A bounded search does not queue behind them: it reaches the server (and waits there for the lock).
            searches.push(tracked(gated.search(tenant, byTagBounded)));
            await until("the bounded search waits at the server too", async () => (await waitingAtServer()) >= 3);
            expect(gated.poolStats()).toMatchObject({ used: 3, pendingAcquires: 0 });
          } finally {
            await locker.query("UNLOCK TABLES");
          }
          for (const page of await Promise.all(searches.map((s) => s.promise))) expectTagged(page);
          expect(await waitingAtServer()).toBe(0);
        },
      );

      /** Search statements of `name`'s tenant at the server (the statements carry their bindings as text). */
      const atServerFor = async (name: string): Promise<number> => {
        const [rows] = await locker.query(
          "SELECT COUNT(*) AS n FROM information_schema.processlist WHERE db = DATABASE() AND id <> " +
            "CONNECTION_ID() AND command = 'Query' AND info LIKE ?",
          [`%t.name = '${name}'%`],
        );
        return Number((rows as Array<{ n: number | string }>)[0]?.n ?? 0);
      };

      it(
        "takes a search whose caller leaves while it waits at the gate out of the line, with the signal's " + "reason",
        async () => {
          await locker.query("LOCK TABLES definition_terms WRITE");
          let held: Array<ReturnType<typeof tracked<ListResult>>> = [];
          try {
            held = [1, 2].map(() => tracked(gated.search(tenant, byTag)));
            await until("two searches wait at the server", async () => (await waitingAtServer()) >= 2);
            const leaving = new AbortController();
            const waiting = tracked(gated.search(tenant, byTag, { signal: leaving.signal }));
            const next = tracked(gated.search(tenant, byTag));
            leaving.abort(new Error("the client left"));
            // Out of the line while the two ahead of it still hold their slots.
            await expect(waiting.promise).rejects.toThrow("the client left");
            expect(next.settled()).toBe(false);
            held.push(next);
          } finally {
            await locker.query("UNLOCK TABLES");
          }
          for (const page of await Promise.all(held.map((s) => s.promise))) expectTagged(page);
        },
      );

      it(
        "kills a running search statement whose caller leaves (KILL QUERY), and its connection serves the next " +
          "search",
        async () => {
          await locker.query("LOCK TABLES definition_terms WRITE");
          try {
            const leaving = new AbortController();
            const running = tracked(gated.search(tenant, byTag, { signal: leaving.signal }));
            await until("the search waits at the server", async () => (await waitingAtServer()) >= 1);
            leaving.abort(new Error("the client left"));
            await expect(running.promise).rejects.toThrow("the client left");
            // Gone from the server while the lock it waited for is still held.
            await until("the statement is gone from the server", async () => (await atServerFor(tenant)) === 0);
            expect(gated.poolStats()).toMatchObject({ used: 0, pendingAcquires: 0 });
          } finally {
            await locker.query("UNLOCK TABLES");
          }
          // Every pooled connection, the one whose statement was killed among them, answers.
          const pages = await Promise.all(Array.from({ length: 4 }, () => gated.search(tenant, byTag)));
          for (const page of pages) expectTagged(page);
        },
      );

      it(
        "kills the statements of callers that left even when they hold every pooled connection (KILL goes on a " +
          "connection of its own)",
        async () => {
          await locker.query("LOCK TABLES definition_terms WRITE");
          try {
            // Bounded searches skip the gate: ten of them hold all ten pooled connections, waiting for the lock.
            const leaving = Array.from({ length: 10 }, () => new AbortController());
            const held = leaving.map((c) => tracked(gated.search(tenant, byTagBounded, { signal: c.signal })));
            await until("ten searches wait at the server", async () => (await atServerFor(tenant)) === 10);
            expect(gated.poolStats()).toMatchObject({ used: 10 });
            for (const c of leaving) c.abort(new Error("the client left"));
            for (const search of held) await expect(search.promise).rejects.toThrow("the client left");
            // All killed while the lock is still held: no KILL waited for a pooled connection.
            await until("every statement is gone from the server", async () => (await atServerFor(tenant)) === 0);
            expect(gated.poolStats()).toMatchObject({ used: 0, pendingAcquires: 0 });
          } finally {
            await locker.query("UNLOCK TABLES");
          }
          expectTagged(await gated.search(tenant, byTag));
        },
      );

      it("admits another tenant's search before the queued searches of a tenant holding all its slots", async () => {
        const fair = await createSqlRepository({
          ...target(),
          timeoutMs: 30_000,
          search: { maxConcurrent: 3, maxPerTenant: 2, timeoutMs: 0 },
        });
        let searches: Array<ReturnType<typeof tracked<ListResult>>> = [];
        await locker.query("LOCK TABLES definition_terms WRITE");
        try {
          searches = [1, 2, 3, 4].map(() => tracked(fair.search(tenant, byTag)));
          await until("two of the tenant's searches wait at the server", async () => (await atServerFor(tenant)) >= 2);
          // The third slot is free, but the tenant holds its two: its other searches wait at the gate.
          const theOther = tracked(fair.search(otherTenant, byTag));
          searches.push(theOther);
          await until(
            "the other tenant's search reaches the server",
            async () => (await atServerFor(otherTenant)) === 1,
          );
          expect(await atServerFor(tenant)).toBe(2);
          expect(fair.poolStats()).toMatchObject({ used: 3, pendingAcquires: 0 });
        } finally {
          await locker.query("UNLOCK TABLES");
        }
        const pages = await Promise.all(searches.map((s) => s.promise));
        for (const page of pages.slice(0, 4)) expectTagged(page);
        expect(pages[4]?.total).toBe(1);
        await fair.close();
      });

      it(
        "gives a search one time budget: its page statement gets what its plan statement (the words' counters) " +
          "left, not a fresh SEARCH_TIMEOUT_MS",
        async () => {
          const limitMs = 10_000;
          const spentMs = 600;
          const one = await createSqlRepository({
            ...target(),
            timeoutMs: 30_000,
            search: { maxConcurrent: 1, timeoutMs: limitMs },
          });
          const url = target().databaseUrl as string;
          const [counts, agents] = await Promise.all([1, 2].map(() => createConnection(mysqlConnectionOptions(url))));
          /** The time limit, in seconds, of a statement at the server whose text matches `like`. */
          const limitOf = async (like: string): Promise<number | undefined> => {
            const [rows] = await locker.query(
              "SELECT info FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID() AND " +
                "command = 'Query' AND info LIKE ?",
              [like],
            );
            const info = (rows as Array<{ info: string }>)[0]?.info;
            const seconds = info?.match(/max_statement_time = ([0-9.]+)/)?.[1];
            return seconds === undefined ? undefined : Number(seconds);
          };
          let keyword: ReturnType<typeof tracked<ListResult>> | undefined;
          try {
            // Two words: their counters are read first (the plan), then the page, which joins `agents`.
            await agents?.query("LOCK TABLES agents WRITE");
            await counts?.query("LOCK TABLES definition_term_counts WRITE");
            keyword = tracked(
              one.search(tenant, { ...unfilteredQuery(20, 0), words: ["nothingmatchesthis", "noreither"] }),
            );
            await until(
              "the plan waits at the server",
              async () => (await limitOf("%max_statement_time%FROM definition_term_counts%")) !== undefined,
            );
            // The plan spends part of the budget waiting.
            await new Promise((resolve) => setTimeout(resolve, spentMs));
            await counts?.query("UNLOCK TABLES");
            let seconds: number | undefined;
            await until(
              "the page waits at the server",
              async () => (seconds = await limitOf("%max_statement_time%FROM tenants%")) !== undefined,
            );
            expect(seconds).toBeLessThanOrEqual((limitMs - spentMs) / 1000);
          } finally {
            for (const session of [counts, agents]) await session?.query("UNLOCK TABLES").catch(() => undefined);
          }
          expect((await keyword?.promise)?.total).toBe(0);
          for (const session of [counts, agents]) await session?.end();
          await one.close();
        },
      );

      it(
        "stops a search at SEARCH_TIMEOUT_MS with UNAVAILABLE and a message without SQL; searches work again " +
          "after",
        async () => {
          await locker.query("LOCK TABLES definition_terms WRITE");
          let error: unknown;
          try {
            error = await limited.search(tenant, byTag).then(
              () => undefined,
              (e: unknown) => e,
            );
          } finally {
            await locker.query("UNLOCK TABLES");
          }
          expect(error).toBeInstanceOf(RegistryError);
          const registryError = error as RegistryError;
          expect(registryError.code).toBe("UNAVAILABLE");
          expect(registryError.message).toMatch(/longer than the limit of 0\.2 seconds.*narrow it with filters/);
          // What the caller gets: the message and the code, no SQL, no stack.
          const body = errorBody(registryError);
          expect(Object.keys(body).sort()).toEqual(["code", "error"]);
          expect(JSON.stringify(body)).not.toMatch(/select|definition_terms|statement_time|tenants|\bat \w/i);
          expectTagged(await limited.search(tenant, byTag));
          // The connection the server interrupted is still good: every pooled connection answers.
          const pages = await Promise.all(Array.from({ length: 4 }, () => limited.search(tenant, byTag)));
          for (const page of pages) expectTagged(page);
        },
      );
    });
});
