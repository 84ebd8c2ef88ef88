/**
 * Issue 25, item 3: a request's work ends with the request. A costly search
 * whose client leaves stops: waiting at the search gate, it leaves the line;
 * running at MariaDB, its statement is killed (`KILL QUERY`), whichever way
 * the client left: an HTTP/1.1 connection closed, an HTTP/2 stream reset, a
 * gRPC call cancelled or past its deadline.
 *
 * A second session's `LOCK TABLES definition_terms WRITE` holds every search
 * filtered by tag at the server, as test/storage/search-limits.test.ts does,
 * so a search is deterministically "running" until the test lets it go.
 */

import { connect as connectHttp2, constants as http2 } from "node:http2";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import type { Connection } from "mysql2/promise";
import { createConnection } from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AgentDefinitionService,
  ListAgentDefinitionsRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { capturingLogger } from "../support/capturing-logger.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { grpcJsServiceDefinition } from "../support/grpc-js-client.js";
import { mysqlConnectionOptions } from "../support/mysql-url.js";
import { startServer, type TestServer } from "../support/server.js";

const mariadb = testDatabases().find((db) => db.name === "mariadb");
/** A search the gate holds: one tag, ordered by name, reads every match (queries/search.ts isBounded). */
const COSTLY = "/api/asor/v1/default/agentDefinition?tag=gated&orderBy=name";

/** Polls `check` until it holds; fails after 15 s (a bound on the wait, not a timing assertion). */
async function until(what: string, check: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`Gave up waiting until ${what}.`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe.skipIf(mariadb === undefined || mariadb.skip)("on mariadb: a search whose client leaves stops", () => {
  let database: FreshDatabase;
  let server: TestServer & { stop(): Promise<void> };
  let locker: Connection;
  const logger = capturingLogger();

  beforeAll(async () => {
    database = await (mariadb as NonNullable<typeof mariadb>).create();
    // One costly search at a time; budgets long enough that nothing here ends by a time limit.
    server = await startServer(
      database,
      { SEARCH_MAX_CONCURRENT: "1", SEARCH_TIMEOUT_MS: "60000", DATABASE_TIMEOUT_MS: "60000" },
      logger,
    );
    for (const name of ["Able", "Baker", "Charlie"]) {
      const res = await fetch(`${server.baseUrl}/api/asor/v1/default/agentDefinition`, {
        method: "POST",
        headers: { authorization: server.authorization, "content-type": "application/json" },
        body: JSON.stringify(
          minimalDefinition({
            name,
            skills: [{ id: "s", name: "S", description: "Does it.", tags: [{ tag: "gated" }] }],
          }),
        ),
      });
      expect(res.status).toBe(201);
    }
    locker = await createConnection(mysqlConnectionOptions(database.databaseUrl as string));
  });

  afterAll(async () => {
    await locker?.query("UNLOCK TABLES").catch(() => undefined);
    await locker?.end();
    await server?.stop();
    await database?.cleanup();
  });

  /** The registry's statements at the server now (every other session of this database). */
  const atServer = async (): Promise<number> => {
    const [rows] = await locker.query(
      "SELECT COUNT(*) AS n FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID() " +
        "AND command = 'Query'",
    );
    return Number((rows as Array<{ n: number | string }>)[0]?.n ?? 0);
  };
  const waitingAtGate = () => server.app.repository.poolStats().searchesWaiting;

  /** Runs `body` with the searches' table locked, and unlocks it however `body` ends. */
  const withTableLocked = async (body: () => Promise<void>): Promise<void> => {
    await locker.query("LOCK TABLES definition_terms WRITE");
    try {
      await body();
    } finally {
      await locker.query("UNLOCK TABLES");
    }
  };

  it(
    "HTTP/1.1: a request cancelled while it waits at the gate leaves the line, and the one behind it is served " +
      "next",
    async () => {
      let next: Promise<Response> | undefined;
      const holder = new AbortController();
      await withTableLocked(async () => {
        void fetch(`${server.baseUrl}${COSTLY}`, {
          headers: { authorization: server.authorization },
          signal: holder.signal,
        }).catch(() => undefined);
        await until("the first search runs at the server", async () => (await atServer()) === 1);
        const leaving = new AbortController();
        void fetch(`${server.baseUrl}${COSTLY}`, {
          headers: { authorization: server.authorization },
          signal: leaving.signal,
        }).catch(() => undefined);
        await until("the second search waits at the gate", () => waitingAtGate() === 1);
        next = fetch(`${server.baseUrl}${COSTLY}`, { headers: { authorization: server.authorization } });
        await until("the third search waits behind it", () => waitingAtGate() === 2);
        leaving.abort();
        // Out of the line while the first search still holds the only slot.
        await until("the cancelled search left the line", () => waitingAtGate() === 1);
        expect(await atServer()).toBe(1);
        // The holder leaves too: its statement is killed and its slot goes to the search behind.
        holder.abort();
        await until(
          "the next search reaches the server",
          async () => waitingAtGate() === 0 && (await atServer()) === 1,
        );
      });
      const res = await (next as Promise<Response>);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { total: number }).total).toBe(3);
    },
  );

  it(
    "HTTP/2: a REST search whose stream is reset (RST_STREAM) is killed at the server, and its 499 is logged once " +
      "it stopped",
    async () => {
      await withTableLocked(async () => {
        const session = connectHttp2(server.baseUrl);
        session.on("error", () => undefined);
        try {
          const stream = session.request({
            ":method": "GET",
            ":path": COSTLY,
            authorization: server.authorization,
            "x-request-id": "reset-search",
          });
          stream.on("error", () => undefined);
          stream.resume();
          await until("the search runs at the server", async () => (await atServer()) === 1);
          stream.close(http2.NGHTTP2_CANCEL);
          await until("the statement is gone from the server", async () => (await atServer()) === 0);
        } finally {
          session.destroy();
        }
      });
      await until("the access line is written", () =>
        logger.lines.some((l) => l.message === "request" && l.requestId === "reset-search"),
      );
      const line = logger.lines.find((l) => l.message === "request" && l.requestId === "reset-search");
      expect(line).toMatchObject({ level: "info", status: 499 });
      expect(logger.lines.filter((l) => l.level === "error")).toEqual([]);
    },
  );

  describe("gRPC (@grpc/grpc-js)", () => {
    let client: grpc.Client & Record<string, (...args: unknown[]) => grpc.ClientUnaryCall>;
    beforeAll(() => {
      const Client = grpc.makeGenericClientConstructor(
        grpcJsServiceDefinition(AgentDefinitionService),
        "AgentDefinitionService",
      );
      client = new Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure()) as typeof client;
    });
    afterAll(() => client?.close());

    /** Starts a costly ListAgentDefinitions; resolves with its error code. */
    const list = (
      options: grpc.CallOptions = {},
    ): { call: grpc.ClientUnaryCall; done: Promise<number | undefined> } => {
      const metadata = new grpc.Metadata();
      metadata.set("authorization", server.authorization);
      let call: grpc.ClientUnaryCall | undefined;
      const done = new Promise<number | undefined>((resolve) => {
        const request = create(ListAgentDefinitionsRequestSchema, { tag: ["gated"], orderBy: "name" });
        call = client.listAgentDefinitions?.(request, metadata, options, (err: grpc.ServiceError | null) =>
          resolve(err?.code),
        );
      });
      return { call: call as grpc.ClientUnaryCall, done };
    };

    it("a cancelled call's statement is killed at the server", async () => {
      await withTableLocked(async () => {
        const { call, done } = list();
        await until("the search runs at the server", async () => (await atServer()) === 1);
        call.cancel();
        expect(await done).toBe(grpc.status.CANCELLED);
        await until("the statement is gone from the server", async () => (await atServer()) === 0);
      });
    });

    it("a call past its deadline has its statement killed at the server", async () => {
      await withTableLocked(async () => {
        const { done } = list({ deadline: Date.now() + 1_000 });
        await until("the search runs at the server", async () => (await atServer()) === 1);
        expect(await done).toBe(grpc.status.DEADLINE_EXCEEDED);
        await until("the statement is gone from the server", async () => (await atServer()) === 0);
      });
    });
  });
});
