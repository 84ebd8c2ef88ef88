/**
 * The watch across replicas (issue 20, items 3-4): two service processes on one MariaDB database;
 * 500 writes (creates, updates, status changes) through one while a watcher reads Server-Sent Events
 * from the other; the watcher is cut off in the middle and resumes with Last-Event-ID; it ends with
 * exactly the 500, in revision order, with no gap. Then the watcher's process is stopped: the stream
 * ends cleanly and the process exits 0. Before that, the bound of item 4: a write acknowledged by one
 * process reaches a watcher of the other within 1 s, at the default WATCH_POLL_MS (200).
 */
import { createConnection } from "mysql2/promise";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { openLocalIssuer } from "../../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { mysqlConnectionOptions } from "../support/mysql-url.js";
import { ALL_DOMAINS } from "../support/server.js";
import { type ServerProcess, spawnServer } from "../support/server-process.js";

const mariadb = testDatabases().find((db) => db.name === "mariadb");

/** Asserts that the next change event (bookmarks skipped) is `revision`'s; 5 s to fail clearly, not hang. */
async function nextChangeIs(events: AsyncGenerator<{ id: string; event: string }>, revision: string): Promise<void> {
  for (;;) {
    const next = await Promise.race([
      events.next(),
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`revision ${revision}: no event within 5 s`)), 5_000),
      ),
    ]);
    if (next.done === true) throw new Error(`the stream ended before revision ${revision}`);
    if (next.value.event === "BOOKMARK") continue;
    expect(next.value.id).toBe(revision);
    return;
  }
}

/** The events of an SSE body, each `[id, event]`, as they arrive; ends with the body. */
async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<{ id: string; event: string }> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    for (let end = buffer.indexOf("\n\n"); end !== -1; end = buffer.indexOf("\n\n")) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const field = (name: string) =>
        block
          .split("\n")
          .find((line) => line.startsWith(`${name}: `))
          ?.slice(name.length + 2);
      const id = field("id");
      const event = field("event");
      if (id !== undefined && event !== undefined) yield { id, event };
      else if (event === "error") throw new Error(`error event: ${block}`);
    }
  }
}

describe.skipIf(mariadb === undefined || mariadb.skip)("the watch on two service processes on one MariaDB", () => {
  let database: FreshDatabase;
  let writer: ServerProcess;
  let watcher: ServerProcess;
  let authorization: string;

  beforeAll(async () => {
    database = await (mariadb as NonNullable<typeof mariadb>).create();
    // WATCH_POLL_MS as shipped (200): the 1 s bound is the product's.
    const env = { DATA_DIR: database.dataDir, DATABASE_URL: database.databaseUrl as string };
    // The first migrates the fresh database alone.
    writer = await spawnServer(env);
    watcher = await spawnServer(env);
    const issuer = await openLocalIssuer(localIssuerKeyFile(database.dataDir), parseAuthConfig({}).config);
    authorization = `Bearer ${await issuer.issue({ tenant: "default", domains: ALL_DOMAINS })}`;
  }, 120_000);
  afterAll(async () => {
    await writer?.stop();
    await watcher?.stop();
    await database?.cleanup();
  });

  it("delivers a write acknowledged by one to a watcher of the other within 1 s, each of 8 in turn", async () => {
    const api = (server: ServerProcess) => `${server.baseUrl}/api/asor/v1/default`;
    const list = await fetch(`${api(writer)}/agentDefinition?limit=1`, { headers: { authorization } });
    const start = Number(((await list.json()) as { revision: string }).revision);
    const abort = new AbortController();
    const res = await fetch(`${api(watcher)}/agentDefinitionEvents?since=${start}`, {
      headers: { authorization },
      signal: abort.signal,
    });
    expect(res.status).toBe(200);
    const events = sseEvents(res.body as ReadableStream<Uint8Array>);
    const elapsed: number[] = [];
    try {
      for (let i = 0; i < 8; i++) {
        // Each write lands at another point of the watcher's poll cycle.
        await new Promise((resolve) => setTimeout(resolve, 37 * i));
        const written = await fetch(`${api(writer)}/agentDefinition`, {
          method: "POST",
          headers: { authorization, "content-type": "application/json" },
          body: JSON.stringify(minimalDefinition({ name: `bound-${i}` })),
        });
        const acknowledged = performance.now();
        expect(written.status).toBe(201);
        const revision = ((await written.json()) as { meta: { modRevision: string } }).meta.modRevision;
        // One write at a time: the next event is this one's.
        await nextChangeIs(events, revision);
        elapsed.push(performance.now() - acknowledged);
      }
    } finally {
      abort.abort();
    }
    for (const ms of elapsed)
      expect(ms, `each write's delivery after its acknowledgement (ms): ${elapsed.map(Math.round)}`).toBeLessThan(1000);
  }, 60_000);

  it("delivers within 1 s while every pooled connection of the watcher's process waits for a lock", async () => {
    const api = (server: ServerProcess) => `${server.baseUrl}/api/asor/v1/default`;
    const post = (server: ServerProcess, body: unknown) =>
      fetch(`${api(server)}/agentDefinition`, {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const held = await post(writer, minimalDefinition({ name: "held" }));
    expect(held.status).toBe(201);
    const { id } = (await held.json()) as { id: string };
    const list = await fetch(`${api(writer)}/agentDefinition?limit=1`, { headers: { authorization } });
    const start = Number(((await list.json()) as { revision: string }).revision);
    const abort = new AbortController();
    const res = await fetch(`${api(watcher)}/agentDefinitionEvents?since=${start}`, {
      headers: { authorization },
      signal: abort.signal,
    });
    expect(res.status).toBe(200);
    const events = sseEvents(res.body as ReadableStream<Uint8Array>);
    // Another session locks the definition's row; updates of its key through the watcher's process each hold a
    // pooled connection while they wait for it: more of them than the pool has connections (10).
    const lock = await createConnection(mysqlConnectionOptions(database.databaseUrl as string));
    const updates: Promise<Response>[] = [];
    try {
      await lock.query("BEGIN");
      await lock.query("SELECT id FROM agent_definitions WHERE id = ? FOR UPDATE", [id]);
      for (let i = 0; i < 14; i++)
        updates.push(post(watcher, minimalDefinition({ name: "held", description: `waiting ${i}` })));
      await new Promise((resolve) => setTimeout(resolve, 500));
      const written = await post(writer, minimalDefinition({ name: "while-held" }));
      const acknowledged = performance.now();
      expect(written.status).toBe(201);
      const revision = ((await written.json()) as { meta: { modRevision: string } }).meta.modRevision;
      await nextChangeIs(events, revision);
      expect(performance.now() - acknowledged).toBeLessThan(1000);
    } finally {
      await lock.query("ROLLBACK");
      await lock.end();
      abort.abort();
    }
    // The updates went on once the lock was gone.
    for (const update of await Promise.all(updates)) expect([200, 201], await update.text()).toContain(update.status);
  }, 60_000);

  it("delivers 500 writes made through one to a watcher of the other, across a resume, exactly once", async () => {
    const api = (server: ServerProcess) => `${server.baseUrl}/api/asor/v1/default`;
    const list = await fetch(`${api(writer)}/agentDefinition?limit=1`, { headers: { authorization } });
    const start = Number(((await list.json()) as { revision: string }).revision);

    const writes: string[] = [];
    const ids: string[] = [];
    const write = async (i: number) => {
      // 250 new agents, then an update or a status change of one of them: each write is one revision.
      if (i < 250) {
        const res = await fetch(`${api(writer)}/agentDefinition`, {
          method: "POST",
          headers: { authorization, "content-type": "application/json" },
          body: JSON.stringify(minimalDefinition({ name: `replica-${i}` })),
        });
        expect(res.status).toBe(201);
        ids.push(((await res.json()) as { id: string }).id);
        writes.push("ADDED");
      } else if (i % 2 === 0) {
        const n = i - 250;
        const res = await fetch(`${api(writer)}/agentDefinition`, {
          method: "POST",
          headers: { authorization, "content-type": "application/json" },
          body: JSON.stringify(minimalDefinition({ name: `replica-${n}`, description: `update ${i}` })),
        });
        expect(res.status).toBe(201);
        writes.push("MODIFIED");
      } else {
        const res = await fetch(`${api(writer)}/agentDefinition/${ids[i - 250]}/status`, {
          method: "PATCH",
          headers: { authorization, "content-type": "application/json" },
          body: JSON.stringify({ status: "DEPRECATED" }),
        });
        expect(res.status).toBe(200);
        writes.push("STATUS_CHANGED");
      }
    };

    const received: { id: string; event: string }[] = [];
    const read = async (headers: Record<string, string>, query: string, until: number, signal: AbortSignal) => {
      const res = await fetch(`${api(watcher)}/agentDefinitionEvents${query}`, {
        headers: { authorization, ...headers },
        signal,
      });
      expect(res.status).toBe(200);
      for await (const event of sseEvents(res.body as ReadableStream<Uint8Array>)) {
        if (event.event === "BOOKMARK") continue;
        received.push(event);
        if (received.length >= until) return res;
      }
      return res;
    };

    // The first connection is cut off after 200 events; the writes go on meanwhile.
    const first = new AbortController();
    const firstRead = read({}, `?since=${start}`, 200, first.signal).then(() => first.abort());
    let next = 0;
    const writing = (async () => {
      for (; next < 500; next++) await write(next);
    })();
    await firstRead;
    const last = received.at(-1)?.id as string;
    const second = new AbortController();
    await writing;
    await read({ "last-event-id": last }, "", 500, second.signal);

    expect(received.map((e) => Number(e.id))).toEqual(Array.from({ length: 500 }, (_, i) => start + 1 + i));
    expect(received.map((e) => e.event)).toEqual(writes);

    // A stop ends the stream cleanly (the body ends, no error event) and the process exits 0.
    const open = await fetch(`${api(watcher)}/agentDefinitionEvents`, { headers: { authorization } });
    const ended = (async () => {
      for await (const _ of sseEvents(open.body as ReadableStream<Uint8Array>));
      return "ended";
    })();
    const code = await watcher.stop();
    expect(await ended).toBe("ended");
    expect(code).toBe(0);
    second.abort();
  }, 180_000);
});
