import { mkdtemp, rm } from "node:fs/promises";
import { connect as connectHttp2, constants as http2 } from "node:http2";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { definition, keyOf, newId } from "../storage/fixtures.js";
import { type AuthorizedProcess, spawnAuthorizedServer } from "../support/authorized-process.js";
import { testDatabases } from "../support/databases.js";
import { minimalDefinition, withoutReadOnly } from "../support/definitions.js";
import { type MariadbInstance, mariadbBinaries, startMariadbInstance } from "../support/mariadb-instance.js";
import { mysqlSuiteOff } from "../support/mysql-url.js";
import { forEachRuntimeAndDatabase, useServerUnder } from "../support/runtimes.js";
import { RUNTIMES } from "../support/server-process.js";
import { createTcpProxy } from "../support/tcp-proxy.js";
import { startWriteBurst, type WriteOutcome } from "../support/write-burst.js";

const PATH = "/api/asor/v1/default/agentDefinition";
/** DATABASE_TIMEOUT_MS of the service under test. */
const TIMEOUT_MS = 1500;
/**
 * The longest a request may take while the database is down or hung: a wait
 * for a pooled connection and one statement, each bounded by the timeout,
 * plus scheduling slack.
 */
const LONGEST_MS = 2 * TIMEOUT_MS + 1000;

const haveMariadb = mariadbBinaries() !== undefined && !mysqlSuiteOff();
if (!haveMariadb && !mysqlSuiteOff() && process.env.CI === "true")
  throw new Error("The fault tests need MariaDB installed (mariadbd, mariadb-install-db).");

/** What the database holds for a burst, and how it compares with what the clients were told. */
async function reconcile(mariadb: MariadbInstance, prefix: string, outcomes: readonly WriteOutcome[]) {
  const rows = await mariadb.query<{ name: string; skills: number }[]>(
    `SELECT name, JSON_LENGTH(document, '$.skills') AS skills FROM faults.agent_definitions WHERE name LIKE ` +
      `'${prefix} %'`,
  );
  const found = new Set(rows.map((r) => r.name));
  const acknowledged = new Set(outcomes.filter((o) => o.status === 201).map((o) => o.name));
  const inDoubt = new Set(
    outcomes.filter((o) => o.status === 503 && o.body?.code === "OUTCOME_UNKNOWN").map((o) => o.name),
  );
  return { rows, found, acknowledged, inDoubt };
}

describe.skipIf(!haveMariadb).each(RUNTIMES)(
  "database faults, on a MariaDB server of the test's own, under %s",
  (runtime) => {
    let mariadb: MariadbInstance;
    let service: AuthorizedProcess;
    let dataDir: string;

    beforeAll(async () => {
      mariadb = await startMariadbInstance();
      await mariadb.query("CREATE DATABASE faults CHARACTER SET utf8mb4");
      dataDir = await mkdtemp(join(tmpdir(), "asor-faults-"));
      service = await spawnAuthorizedServer(
        { databaseUrl: mariadb.url("faults"), dataDir, cleanup: async () => undefined },
        { DATABASE_TIMEOUT_MS: String(TIMEOUT_MS) },
        runtime,
      );
    }, 120_000);

    afterAll(async () => {
      const code = await service?.stop();
      await mariadb?.destroy();
      await rm(dataDir, { recursive: true, force: true });
      expect(code).toBe(0);
    });

    /** Every answer of a burst: a 201, or a 503 in the spec's Error shape; none dropped, none slow. */
    const expectFailFast = (outcomes: readonly WriteOutcome[]) => {
      const unexpected = outcomes.filter((o) => o.status !== 201 && o.status !== 503);
      expect(unexpected.map((o) => `${o.status} ${JSON.stringify(o.body)}`)).toEqual([]);
      for (const failed of outcomes.filter((o) => o.status === 503)) {
        expect(Object.keys(failed.body).sort()).toEqual(["code", "error"]);
        expect(["UNAVAILABLE", "OUTCOME_UNKNOWN"]).toContain(failed.body.code);
      }
      const slowest = Math.max(...outcomes.map((o) => o.millis));
      expect(slowest).toBeLessThan(LONGEST_MS);
    };

    /** Runs a burst through `fault`, then checks the ledger: every 201 stored, every plain failure absent. */
    const burstThrough = async (prefix: string, fault: () => Promise<void>, heal: () => Promise<void>) => {
      const burst = startWriteBurst({
        url: `${service.baseUrl}${PATH}`,
        authorization: service.authorization,
        writers: 8,
        prefix,
      });
      const countOk = (os: readonly WriteOutcome[]) => os.filter((o) => o.status === 201).length;
      await burst.until((os) => countOk(os) >= 40, 30_000);
      await fault();
      const faultAt = Date.now();
      await burst.until((os) => os.filter((o) => o.status === 503).length >= 16, 3 * LONGEST_MS);
      // Long enough for every pooled connection to meet the fault.
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, faultAt + 2 * TIMEOUT_MS - Date.now())));
      const healedAt = Date.now();
      await heal();
      // The service recovers on its own: the same process answers 201s again.
      await burst.until((os) => os.filter((o) => o.status === 201 && o.startedAt > healedAt).length >= 40, 30_000);
      const outcomes = await burst.stop();
      expectFailFast(outcomes);
      expect(service.alive()).toBe(true);

      const { rows, found, acknowledged, inDoubt } = await reconcile(mariadb, prefix, outcomes);
      // Nothing half-written: every stored definition has both its skills.
      expect(rows.filter((r) => Number(r.skills) !== 2)).toEqual([]);
      expect([...acknowledged].filter((name) => !found.has(name))).toEqual([]);
      // What failed is absent, except a write whose COMMIT was cut off: the service said it may be saved.
      expect([...found].filter((name) => !acknowledged.has(name) && !inDoubt.has(name))).toEqual([]);
      const foundInDoubt = [...found].filter((name) => inDoubt.has(name)).length;
      if (process.env.FAULT_STATS)
        console.log(prefix, {
          answers: outcomes.length,
          acknowledged: acknowledged.size,
          failed: outcomes.filter((o) => o.status === 503).length,
          inDoubt: inDoubt.size,
          foundInDoubt,
          found: found.size,
          slowest: Math.max(...outcomes.map((o) => o.millis)),
        });
      expect(found.size - foundInDoubt).toBe(acknowledged.size);
      return { outcomes, acknowledged, found, inDoubt };
    };

    it("killed during a burst of writes: requests fail fast with 503, the service recovers when it is back, and " +
      "every 201 is stored", async () => {
      const { outcomes, acknowledged, found } = await burstThrough(
        "Killed",
        () => mariadb.kill(),
        () => mariadb.start(),
      );
      expect(outcomes.filter((o) => o.status === 503).length).toBeGreaterThan(0);
      expect(found.size).toBeGreaterThanOrEqual(acknowledged.size);
      // The agents' numbers have no gaps: a write that failed gave its number back.
      const numbers = await mariadb.query<{ number: number }[]>("SELECT number FROM faults.agents ORDER BY number");
      expect(numbers.map((r) => Number(r.number))).toEqual(numbers.map((_, i) => i + 1));
    }, 120_000);

    it(`stalled (SIGSTOP) during a burst of writes: every request ends within ${LONGEST_MS} ms, the service ` +
      `recovers, and every 201 is stored`, async () => {
      const { outcomes } = await burstThrough(
        "Stalled",
        () => mariadb.pause(),
        async () => mariadb.resume(),
      );
      expect(outcomes.filter((o) => o.status === 503).length).toBeGreaterThan(0);
      const numbers = await mariadb.query<{ number: number }[]>("SELECT number FROM faults.agents ORDER BY number");
      expect(numbers.map((r) => Number(r.number))).toEqual(numbers.map((_, i) => i + 1));
    }, 120_000);

    it("a write hung at COMMIT is OUTCOME_UNKNOWN (the database may still commit it); hung before COMMIT it is " +
      "UNAVAILABLE and rolled back", async () => {
      await mariadb.query("CREATE DATABASE doubt CHARACTER SET utf8mb4");
      // Through a proxy that can let a COMMIT through and hold the server's answer to it.
      const proxy = await createTcpProxy({ host: "127.0.0.1", port: Number(new URL(mariadb.url("doubt")).port) });
      const repo = await createSqlRepository({
        databaseUrl: proxy.via(mariadb.url("doubt")),
        dataDir,
        timeoutMs: 1000,
      });
      const agents = async (name: string) =>
        (await mariadb.query<unknown[]>(`SELECT 1 FROM doubt.agents WHERE name = '${name}'`)).length;
      try {
        const before = await repo
          .write("default", async (tx) => {
            const agent = await tx.createAgent("Provider=Acme", "Hung Before Commit");
            await mariadb.pause();
            const def = definition({ name: "Hung Before Commit", id: newId() });
            return tx.insert(keyOf(def), agent, def);
          })
          .catch((error: unknown) => error);
        mariadb.resume();
        expect(before).toMatchObject({ code: "UNAVAILABLE" });

        const atCommit = await repo
          .write("default", async (tx) => {
            const agent = await tx.createAgent("Provider=Acme", "Hung At Commit");
            const def = definition({ name: "Hung At Commit", id: newId() });
            const record = await tx.insert(keyOf(def), agent, def);
            // The statement that commits (the CALL that takes the revisions and commits, migration 0015)
            // reaches the server, which commits; its answer never comes back.
            proxy.holdRepliesAfter("\u0003CALL asor_commit_revisions(");
            return record;
          })
          .catch((error: unknown) => error);
        await proxy.restore();
        expect(atCommit).toMatchObject({ code: "OUTCOME_UNKNOWN" });

        // The server ran the COMMIT it had received before it hung: saved, though the caller got no OK.
        await expect.poll(() => agents("Hung At Commit"), { timeout: 5_000 }).toBe(1);
        // What hung before its COMMIT was rolled back when the connection closed.
        expect(await agents("Hung Before Commit")).toBe(0);
      } finally {
        mariadb.resume();
        await repo.close();
        await proxy.close();
      }
    }, 60_000);

    it("reads fail fast with 503 while the database is down, and answer again once it is back", async () => {
      await mariadb.kill();
      const started = Date.now();
      const res = await fetch(`${service.baseUrl}${PATH}?limit=5`, {
        headers: { authorization: service.authorization },
      });
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ error: expect.any(String), code: "UNAVAILABLE" });
      expect(Date.now() - started).toBeLessThan(LONGEST_MS);
      await mariadb.start();
      const again = await fetch(`${service.baseUrl}${PATH}?limit=5`, {
        headers: { authorization: service.authorization },
      });
      expect(again.status).toBe(200);
    }, 60_000);
  },
);

/** Resolves with how long after `since` the socket was closed. */
const closedAfter = (socket: Socket, since: number) =>
  new Promise<number>((resolve) => socket.once("close", () => resolve(Date.now() - since)));

describe.each(RUNTIMES)("slow and stalled clients, on sqlite, under %s", (runtime) => {
  // Two seconds apart, so that which timeout cut a connection is plain even on a loaded machine (slack below).
  const HEADERS_MS = 2000;
  const REQUEST_MS = 4000;
  // Longer than the request timeout, so a stalled stream is ended by its own timeout, not its connection's.
  const IDLE_MS = 6000;
  const server = useServerUnder(runtime, testDatabases()[0]!, {
    HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_MS),
    HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_MS),
    HTTP2_IDLE_TIMEOUT_MS: String(IDLE_MS),
  });

  it("slowloris headers, never-ending bodies and silent connections are cut off after their timeouts while others " +
    "are served at once", async () => {
    const { port, authorization } = server();
    const open = (): Promise<Socket> =>
      new Promise((resolve) => {
        const socket = connect(port, "127.0.0.1", () => resolve(socket));
        socket.on("error", () => undefined);
      });
    const timers: NodeJS.Timeout[] = [];
    const started = Date.now();

    // Headers that never end: one more header line every 200 ms.
    const slowloris = await Promise.all(Array.from({ length: 30 }, () => open()));
    for (const socket of slowloris) {
      socket.write(`GET ${PATH} HTTP/1.1\r\nHost: x\r\n`);
      timers.push(setInterval(() => socket.writable && socket.write(`X-Slow-${Date.now()}: y\r\n`), 200));
    }
    // A body that never ends: one byte every 200 ms of a declared 100000.
    const trickling = await Promise.all(Array.from({ length: 20 }, () => open()));
    const answers = trickling.map((socket) => {
      let answer = "";
      socket.on("data", (chunk) => (answer += chunk.toString()));
      socket.write(
        `POST ${PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: ${authorization}\r\nContent-Type: ` +
          `application/json\r\nContent-Length: 100000\r\n\r\n{`,
      );
      timers.push(setInterval(() => socket.writable && socket.write(" "), 200));
      return () => answer;
    });
    // Connections that never say a word.
    const silent = await Promise.all(Array.from({ length: 10 }, () => open()));
    // HTTP/2: a gRPC call whose request body never ends, and a connection that stays idle.
    const h2 = connectHttp2(`http://127.0.0.1:${port}`);
    h2.on("error", () => undefined);
    const stalledStream = h2.request({
      ":method": "POST",
      ":path": "/asor.v1.AgentDefinitionService/UpsertAgentDefinition",
      "content-type": "application/grpc",
      te: "trailers",
      authorization,
    });
    stalledStream.on("error", () => undefined);
    stalledStream.write(Buffer.from([0, 0, 0, 0, 100]));
    const streamClosed = new Promise<{ after: number; rstCode: number }>((resolve) =>
      stalledStream.once("close", () => resolve({ after: Date.now() - started, rstCode: stalledStream.rstCode ?? -1 })),
    );
    const idle = connectHttp2(`http://127.0.0.1:${port}`);
    idle.on("error", () => undefined);
    const idleClosed = new Promise<number>((resolve) => idle.once("close", () => resolve(Date.now() - started)));

    const held = [...slowloris, ...trickling, ...silent];
    const closings = held.map((socket) => closedAfter(socket, started));
    let cut = 0;
    for (const socket of held) socket.once("close", () => cut++);

    // Meanwhile everyone else is served at once: while every slow client is still held, none cut yet (a server
    // that served others only once a slow one was gone, out of connections or blocked, would answer after a cut).
    // An order of events, not a timing: the earliest cut is HEADERS_MS away.
    const gets = Array.from({ length: 10 }, () =>
      fetch(`${server().baseUrl}${PATH}?limit=1`, { headers: { authorization } }).then((res) => res.status),
    );
    const post = fetch(`${server().baseUrl}${PATH}`, {
      method: "POST",
      headers: { authorization, "content-type": "application/json" },
      body: JSON.stringify(minimalDefinition({ name: "Served Meanwhile" })),
    }).then((res) => res.status);
    expect(await Promise.all([...gets, post])).toEqual([...Array(10).fill(200), 201]);
    expect(cut).toBe(0);

    const closedAt = await Promise.all(closings);
    for (const timer of timers) clearInterval(timer);
    // Less than the two seconds between the timeouts: each connection was cut by its own timeout, not a later one.
    const slack = 1900;
    expect(Math.max(...closedAt.slice(0, 30))).toBeLessThan(HEADERS_MS + slack);
    expect(Math.max(...closedAt.slice(30, 50))).toBeLessThan(REQUEST_MS + slack);
    expect(Math.max(...closedAt.slice(50))).toBeLessThan(HEADERS_MS + slack);
    // A stalled body gets its answer: 408 Request Timeout.
    for (const answer of answers) expect(answer()).toMatch(/^HTTP\/1\.1 408 /);
    const stream = await streamClosed;
    expect(stream.rstCode).toBe(http2.NGHTTP2_CANCEL);
    expect(stream.after).toBeGreaterThanOrEqual(REQUEST_MS);
    expect(stream.after).toBeLessThan(REQUEST_MS + slack);
    const idleAfter = await idleClosed;
    expect(idleAfter).toBeGreaterThanOrEqual(IDLE_MS);
    expect(idleAfter).toBeLessThan(IDLE_MS + slack);
    h2.close();
  }, 30_000);
});

forEachRuntimeAndDatabase((db, runtime) => {
  describe("clients that disconnect mid-request", () => {
    const server = useServerUnder(runtime, db);

    it(
      "leave nothing half-written: each stored definition is whole, and none whose body was cut off is " + "stored",
      async () => {
        const { port, authorization } = server();
        const sent = new Map<string, Record<string, any>>();
        const cutOff = new Set<string>();
        await Promise.all(
          Array.from({ length: 60 }, async (_, i) => {
            const def = minimalDefinition({
              name: `Cut ${i}`,
              skills: Array.from({ length: 20 }, (_, s) => ({
                id: `s${s}`,
                name: `Skill ${s}`,
                description: "x".repeat(200),
              })),
            });
            const body = Buffer.from(JSON.stringify(def));
            const head =
              `POST ${PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: ${authorization}\r\nContent-Type: ` +
              `application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
            const socket = connect(port, "127.0.0.1");
            socket.on("error", () => undefined);
            await new Promise((resolve) => socket.once("connect", resolve));
            if (i % 3 === 0) {
              // Gone halfway through the body.
              socket.write(head);
              socket.write(body.subarray(0, Math.floor((body.length * (i + 1)) / 61)));
              cutOff.add(def.name);
            } else {
              // Gone right after the whole request, while the write may be running.
              socket.write(head);
              socket.write(body);
              sent.set(def.name, def);
              await new Promise((resolve) => setTimeout(resolve, i % 3 === 1 ? 0 : i % 7));
            }
            socket.destroy();
          }),
        );
        // Let the writes of departed clients finish.
        await new Promise((resolve) => setTimeout(resolve, 1000));
        const stored: any[] = [];
        for (let offset = 0; ; offset += 100) {
          const page = await (
            await fetch(`${server().baseUrl}${PATH}?limit=100&offset=${offset}`, { headers: { authorization } })
          ).json();
          stored.push(...page.data);
          if (page.data.length < 100) break;
        }
        const cut = stored.filter((d) => d.name.startsWith("Cut "));
        expect(cut.filter((d) => cutOff.has(d.name))).toEqual([]);
        for (const d of cut) expect(withoutReadOnly(d)).toEqual(sent.get(d.name));
        const after = await fetch(`${server().baseUrl}${PATH}`, {
          method: "POST",
          headers: { authorization, "content-type": "application/json" },
          body: JSON.stringify(minimalDefinition({ name: "After Cuts" })),
        });
        expect(after.status).toBe(201);
      },
    );
  });
});
