/**
 * The watch (issue 20, items 2-5) against a real server on each database, under Node and under Deno:
 * Server-Sent Events read with fetch, the RPC with @grpc/grpc-js (gRPC) and a Connect client. Each test
 * writes in a tenant of its own, so the revisions it sees are its own writes. Compaction is the service's
 * own (WATCH_RETENTION_COUNT, WATCH_COMPACT_SECONDS) on a server of its own: a Deno process has no handle
 * a test could call.
 */

import { once } from "node:events";
import { connect } from "node:net";
import { gunzipSync } from "node:zlib";
import { create, fromBinary, type Message, toBinary } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import {
  type AgentDefinitionEvent,
  AgentDefinitionEvent_EventType,
  AgentDefinitionEventSchema,
  AgentDefinitionService,
  type WatchAgentDefinitionsRequest,
  WatchAgentDefinitionsRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { withAuthorization } from "../support/auth.js";
import { minimalDefinition } from "../support/definitions.js";
import { rawGrpcCall, rawGrpcStream } from "../support/raw-grpc.js";
import { forEachRuntimeAndDatabase, type ReachableServer, useServerUnder } from "../support/runtimes.js";

/** One Server-Sent Event as the client parsed it. */
interface Sse {
  readonly id?: string;
  readonly event: string;
  readonly data: string;
}

/** An open SSE stream: its events as they arrive, parsed by the SSE rules (lines, blank line ends an event). */
interface SseStream {
  readonly status: number;
  readonly headers: Headers;
  /** The next event, or undefined when the stream ended; fails after `ms`. */
  next(ms?: number): Promise<Sse | undefined>;
  close(): void;
}

async function openSse(url: string, headers: Record<string, string>): Promise<SseStream> {
  const abort = new AbortController();
  const res = await fetch(url, { headers: { accept: "text/event-stream", ...headers }, signal: abort.signal });
  const reader = res.body?.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const parse = (block: string): Sse | undefined => {
    let id: string | undefined;
    let event = "message";
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    return data.length === 0 && id === undefined
      ? undefined
      : { ...(id === undefined ? {} : { id }), event, data: data.join("\n") };
  };
  const next = async (): Promise<Sse | undefined> => {
    for (;;) {
      const end = buffer.indexOf("\n\n");
      if (end !== -1) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = parse(block);
        if (event !== undefined) return event;
        continue;
      }
      if (reader === undefined) return undefined;
      const { done, value } = await reader.read();
      if (done) return undefined;
      buffer += decoder.decode(value, { stream: true });
    }
  };
  return {
    status: res.status,
    headers: res.headers,
    next: (ms = 10_000) =>
      Promise.race([
        next(),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no event within ${ms} ms`)), ms)),
      ]),
    close: () => abort.abort(),
  };
}

interface EventData {
  type: string;
  revision: number;
  definition?: { id: string; name: string; meta: { modRevision?: string; status: string } };
}

/**
 * Resolves with what `attempt` answers once it answers something, trying every 200 ms for `ms`: for what the
 * service does on its own timer (compaction).
 */
async function eventually<T>(attempt: () => Promise<T | undefined>, what: string, ms = 10_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await attempt();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

forEachRuntimeAndDatabase((db, runtime) => {
  const server = useServerUnder(runtime, db, {
    WATCH_POLL_MS: "50",
    WATCH_BOOKMARK_MS: "400",
    WATCH_QUEUE_LIMIT: "20",
  });
  let tenants = 0;

  /** A new tenant of its own for a test (on `on`, else the suite's server), and a bearer for it. */
  const newTenant = async (domains?: string[], on: () => ReachableServer = server) => {
    const name = `watch${++tenants}`;
    const res = await fetch(`${on().baseUrl}/asor/v1/admin/tenants`, {
      method: "POST",
      headers: { authorization: on().authorization, "content-type": "application/json" },
      body: JSON.stringify({ name, sequencePrefix: "W-" }),
    });
    expect(res.status, await res.clone().text()).toBeLessThan(300);
    const authorization = await on().bearer({ tenant: name, ...(domains === undefined ? {} : { domains }) });
    return { name, authorization, base: `${on().baseUrl}/api/asor/v1/${name}` };
  };
  const post = async (t: { base: string; authorization: string }, def: Record<string, unknown>) => {
    const res = await fetch(`${t.base}/agentDefinition`, {
      method: "POST",
      headers: { authorization: t.authorization, "content-type": "application/json" },
      body: JSON.stringify(def),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    return (await res.json()) as { id: string; reference_id: string; meta: { modRevision: string } };
  };
  const setStatus = async (t: { base: string; authorization: string }, id: string, status: string) => {
    const res = await fetch(`${t.base}/agentDefinition/${id}/status`, {
      method: "PATCH",
      headers: { authorization: t.authorization, "content-type": "application/json" },
      body: JSON.stringify({ status }),
    });
    expect(res.status, await res.clone().text()).toBe(200);
  };
  const listRevision = async (t: { base: string; authorization: string }) => {
    const res = await fetch(`${t.base}/agentDefinition?limit=1`, { headers: { authorization: t.authorization } });
    return Number(((await res.json()) as { revision: string }).revision);
  };
  /** About 750 KB of JSON (75 skills of 10,000 characters, under the 1 MiB body limit): few fill the sockets. */
  const large = (i: number) =>
    minimalDefinition({
      name: `large-${i}`,
      skills: Array.from({ length: 75 }, (_, n) => ({
        id: `s${n}`,
        name: `Skill ${n}`,
        description: String.fromCharCode(97 + (n % 26)).repeat(10_000),
      })),
    });
  const watchRequest = (request: { since?: number; bookmark?: boolean }) =>
    toBinary(
      WatchAgentDefinitionsRequestSchema,
      create(WatchAgentDefinitionsRequestSchema, {
        ...request,
        since: request.since === undefined ? undefined : BigInt(request.since),
      }),
    );
  const watchPath = `/${AgentDefinitionService.typeName}/${AgentDefinitionService.method.watchAgentDefinitions.name}`;
  /** A watch over gRPC with @grpc/grpc-js: its events as they come, and how it ended. */
  const grpcWatch = (on: () => ReachableServer, authorization: string, request: { bookmark?: boolean }) => {
    const client = new grpc.Client(`127.0.0.1:${on().port}`, grpc.credentials.createInsecure());
    const metadata = new grpc.Metadata();
    metadata.set("authorization", authorization);
    const call = client.makeServerStreamRequest<Message, AgentDefinitionEvent>(
      watchPath,
      (m) => Buffer.from(toBinary(WatchAgentDefinitionsRequestSchema, m as WatchAgentDefinitionsRequest)),
      (b) => fromBinary(AgentDefinitionEventSchema, b),
      create(WatchAgentDefinitionsRequestSchema, request),
      metadata,
    );
    const events: AgentDefinitionEvent[] = [];
    call.on("data", (event: AgentDefinitionEvent) => events.push(event));
    let failure: grpc.ServiceError | undefined;
    call.on("error", (err: grpc.ServiceError) => {
      failure = err;
    });
    const ended = new Promise<{ code: grpc.status; error: grpc.ServiceError | undefined }>((resolve) =>
      call.on("status", (status: grpc.StatusObject) => resolve({ code: status.code, error: failure })),
    );
    return {
      events,
      ended,
      close: () => {
        call.cancel();
        client.close();
      },
    };
  };

  /** The next `count` change events (bookmarks skipped), as data. */
  const changes = async (stream: SseStream, count: number): Promise<EventData[]> => {
    const seen: EventData[] = [];
    while (seen.length < count) {
      const event = await stream.next();
      if (event === undefined) throw new Error(`the stream ended after ${seen.length} of ${count} changes`);
      if (process.env.WATCH_DEBUG) console.log(event);
      if (event.event === "BOOKMARK") continue;
      const data = JSON.parse(event.data) as EventData;
      expect(event.id).toBe(String(data.revision));
      expect(event.event).toBe(data.type);
      seen.push(data);
    }
    return seen;
  };

  describe("over REST as Server-Sent Events", () => {
    it("sends the writes made after it connected in revision order, no gap, no duplicate", async () => {
      const t = await newTenant();
      const start = await listRevision(t);
      const stream = await openSse(`${t.base}/agentDefinitionEvents?since=${start}`, {
        authorization: t.authorization,
      });
      try {
        expect(stream.status).toBe(200);
        expect(stream.headers.get("content-type")).toMatch(/^text\/event-stream/);
        const a = await post(t, minimalDefinition({ name: "A" }));
        const b = await post(t, minimalDefinition({ name: "B" }));
        await post(t, minimalDefinition({ name: "A", description: "changed" }));
        await setStatus(t, b.id, "DEPRECATED");
        const seen = await changes(stream, 4);
        expect(seen.map((e) => e.revision)).toEqual([start + 1, start + 2, start + 3, start + 4]);
        expect(seen.map((e) => [e.type, e.definition?.id])).toEqual([
          ["ADDED", a.id],
          ["ADDED", b.id],
          ["MODIFIED", a.id],
          ["STATUS_CHANGED", b.id],
        ]);
        // The definition as GET answers it now.
        const got = await fetch(`${t.base}/agentDefinition/${b.id}`, { headers: { authorization: t.authorization } });
        expect(seen[3]?.definition).toEqual(await got.json());
      } finally {
        stream.close();
      }
    });

    it("resumes from Last-Event-ID with every later change and nothing before", async () => {
      const t = await newTenant();
      const start = await listRevision(t);
      const first = await openSse(`${t.base}/agentDefinitionEvents?since=${start}`, { authorization: t.authorization });
      await post(t, minimalDefinition({ name: "one" }));
      await post(t, minimalDefinition({ name: "two" }));
      const [one] = await changes(first, 1);
      first.close();
      // Written while nobody watches.
      await post(t, minimalDefinition({ name: "three" }));
      await post(t, minimalDefinition({ name: "four" }));
      const again = await openSse(`${t.base}/agentDefinitionEvents`, {
        authorization: t.authorization,
        "last-event-id": String(one?.revision),
      });
      try {
        await post(t, minimalDefinition({ name: "five" }));
        const seen = await changes(again, 4);
        expect(seen.map((e) => e.definition?.name)).toEqual(["two", "three", "four", "five"]);
        expect(seen.map((e) => e.revision)).toEqual([start + 2, start + 3, start + 4, start + 5]);
      } finally {
        again.close();
      }
    });

    it("writes the events that are ready at once as one chunk of the chunked coding", async () => {
      const t = await newTenant();
      const start = await listRevision(t);
      for (const name of ["one", "two", "three"]) await post(t, minimalDefinition({ name }));
      // A start from an older revision reads the three at once: one batch.
      const socket = connect(server().port, "127.0.0.1");
      await once(socket, "connect");
      const received: Buffer[] = [];
      const last = `id: ${start + 3}\n`;
      const read = new Promise<Buffer>((resolve, reject) => {
        socket.on("data", (chunk: Buffer) => {
          received.push(chunk);
          const all = Buffer.concat(received);
          if (all.includes(`${last}event: ADDED\n`) && all.subarray(all.indexOf(last)).includes("\n\n\r\n"))
            resolve(all);
        });
        socket.on("error", reject);
        setTimeout(() => reject(new Error(`no third event within 10 s: ${Buffer.concat(received)}`)), 10_000);
      });
      socket.write(
        `GET /api/asor/v1/${t.name}/agentDefinitionEvents?since=${start} HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
          `Authorization: ${t.authorization}\r\nAccept: text/event-stream\r\n\r\n`,
      );
      try {
        const bytes = await read;
        const head = bytes.subarray(0, bytes.indexOf("\r\n\r\n")).toString("latin1").toLowerCase();
        expect(head).toMatch(/^http\/1\.1 200/);
        expect(head).toContain("transfer-encoding: chunked");
        // The body as chunks: a size line in hex, that many bytes, CRLF.
        const chunks: string[] = [];
        for (let at = bytes.indexOf("\r\n\r\n") + 4; at < bytes.length; ) {
          const line = bytes.indexOf("\r\n", at);
          const size = Number.parseInt(bytes.toString("latin1", at, line), 16);
          const data = bytes.subarray(line + 2, line + 2 + size);
          expect(data.byteLength, "a whole chunk").toBe(size);
          expect(bytes.toString("latin1", line + 2 + size, line + 4 + size)).toBe("\r\n");
          chunks.push(data.toString("utf8"));
          at = line + 4 + size;
        }
        const withFirst = chunks.find((chunk) => chunk.includes(`id: ${start + 1}\n`));
        expect(withFirst, chunks.join("|")).toBeDefined();
        expect(withFirst).toContain(`id: ${start + 2}\n`);
        expect(withFirst).toContain(last);
        expect(withFirst?.match(/\n\n/g)).toHaveLength(3);
      } finally {
        socket.destroy();
      }
    });

    it("applies the list's filters, and STATUS_CHANGED passes a status filter", async () => {
      const t = await newTenant();
      const start = await listRevision(t);
      const url = `${t.base}/agentDefinitionEvents?since=${start}&provider=Provider%3DWanted&status=ACTIVE`;
      const stream = await openSse(url, { authorization: t.authorization });
      try {
        await post(t, minimalDefinition({ name: "other", provider: { id: "Provider=Other" } }));
        const wanted = await post(t, minimalDefinition({ name: "wanted", provider: { id: "Provider=Wanted" } }));
        // Read before the status change: an event carries its definition as read, and a definition read
        // DEACTIVATED would not pass status=ACTIVE in its ADDED event (docs/api.md, "Watch").
        const seen = await changes(stream, 1);
        await setStatus(t, wanted.id, "DEACTIVATED");
        await post(t, minimalDefinition({ name: "wanted2", provider: { id: "Provider=Wanted" } }));
        seen.push(...(await changes(stream, 2)));
        expect(seen.map((e) => [e.type, e.definition?.name, e.revision])).toEqual([
          ["ADDED", "wanted", start + 2],
          ["STATUS_CHANGED", "wanted", start + 3],
          ["ADDED", "wanted2", start + 4],
        ]);
      } finally {
        stream.close();
      }
    });

    it("sends a BOOKMARK at once on request and then periodically, at the revision reached", async () => {
      const t = await newTenant();
      await post(t, minimalDefinition({ name: "before" }));
      const start = await listRevision(t);
      const stream = await openSse(`${t.base}/agentDefinitionEvents?bookmark=true&provider=Provider%3DNone`, {
        authorization: t.authorization,
      });
      try {
        const first = await stream.next();
        expect(first?.event).toBe("BOOKMARK");
        expect(JSON.parse(first?.data ?? "{}")).toEqual({ type: "BOOKMARK", revision: start });
        // Filtered out, but the bookmarks move past it.
        await post(t, minimalDefinition({ name: "filtered" }));
        let revision = start;
        for (let i = 0; i < 20 && revision <= start; i++) {
          const event = await stream.next(5_000);
          expect(event?.event).toBe("BOOKMARK");
          revision = Number(event?.id);
        }
        expect(revision).toBe(start + 1);
      } finally {
        stream.close();
      }
    });

    it("keeps tenants apart: a watcher sees only its tenant, and may not watch another", async () => {
      const mine = await newTenant();
      const theirs = await newTenant();
      const start = await listRevision(mine);
      const stream = await openSse(`${mine.base}/agentDefinitionEvents?since=${start}`, {
        authorization: mine.authorization,
      });
      try {
        await post(theirs, minimalDefinition({ name: "theirs" }));
        await post(mine, minimalDefinition({ name: "mine" }));
        const [only] = await changes(stream, 1);
        expect(only?.definition?.name).toBe("mine");
        const refused = await fetch(`${theirs.base}/agentDefinitionEvents`, {
          headers: { authorization: mine.authorization },
        });
        expect(refused.status).toBe(403);
        const noDomain = await newTenant(["Some: Other"]);
        const denied = await fetch(`${noDomain.base}/agentDefinitionEvents`, {
          headers: { authorization: noDomain.authorization },
        });
        expect(denied.status).toBe(403);
        const anonymous = await fetch(`${mine.base}/agentDefinitionEvents`);
        expect(anonymous.status).toBe(401);
      } finally {
        stream.close();
      }
    });

    it("ends with an UNAUTHENTICATED error event when the token expires", async () => {
      const t = await newTenant();
      const short = await server().bearer({ tenant: t.name, ttlSeconds: 2 });
      const stream = await openSse(`${t.base}/agentDefinitionEvents`, { authorization: short });
      try {
        expect(stream.status).toBe(200);
        let last: Sse | undefined;
        for (let event = await stream.next(6_000); event !== undefined; event = await stream.next(6_000)) last = event;
        expect(last?.event).toBe("error");
        expect(JSON.parse(last?.data ?? "{}"), last?.data).toMatchObject({ errors: [{ code: "UNAUTHENTICATED" }] });
      } finally {
        stream.close();
      }
    });
  });

  describe("a watcher that does not read", () => {
    it("is closed with a WATCH_TOO_SLOW error event once its queue (WATCH_QUEUE_LIMIT 20) is full", async () => {
      const t = await newTenant();
      const start = await listRevision(t);
      // A raw socket that is not read: what the service writes fills the sockets' buffers, then its queue.
      const socket = connect(server().port, "127.0.0.1");
      await once(socket, "connect");
      socket.pause();
      const received: Buffer[] = [];
      socket.on("data", (chunk: Buffer) => received.push(chunk));
      const ended = once(socket, "close");
      socket.write(
        `GET /api/asor/v1/${t.name}/agentDefinitionEvents?since=${start} HTTP/1.1\r\nHost: test\r\n` +
          `Authorization: ${t.authorization}\r\nAccept: text/event-stream\r\nConnection: close\r\n\r\n`,
      );
      try {
        // 60 x 750 KB = 45 MB: more than loopback's socket buffers hold (6 to 15 of these events were seen to
        // pass before the close) and 20 events more.
        const writes = 60;
        for (let i = 0; i < writes; i++) await post(t, large(i));
        socket.resume();
        await ended;
        const text = Buffer.concat(received).toString("utf8");
        const errors = text.split("\n").filter((line) => line.startsWith("event: error"));
        expect(errors).toHaveLength(1);
        const data = /event: error\ndata: (.*)\n/.exec(text)?.[1];
        expect(JSON.parse(data ?? "{}"), data).toMatchObject({ errors: [{ code: "WATCH_TOO_SLOW" }] });
        // Closed before it got them all: what it received ends in revision order, with no gap, short of the writes.
        const ids = [...text.matchAll(/^id: (\d+)\nevent: (?!BOOKMARK)/gm)].map((m) => Number(m[1]));
        expect(ids.length).toBeLessThan(writes);
        expect(ids).toEqual(Array.from({ length: ids.length }, (_, i) => start + 1 + i));
      } finally {
        socket.destroy();
      }
    }, 120_000);

    it("over gRPC is closed with RESOURCE_EXHAUSTED (WATCH_TOO_SLOW) once its queue is full", async () => {
      const t = await newTenant();
      const start = await listRevision(t);
      // A stream that is not read (HTTP/2 flow control stops the service's writes), then read to its end.
      const watch = rawGrpcStream(
        server().baseUrl,
        t.authorization,
        watchPath.slice(1),
        watchRequest({ since: start }),
      );
      try {
        await watch.headers;
        watch.pause();
        const writes = 60;
        for (let i = 0; i < writes; i++) await post(t, large(i));
        watch.resume();
        const { error } = await watch.closed;
        expect(error?.code, error?.message).toBe(Code.ResourceExhausted);
        expect(error?.findDetails(ValidationErrorSchema)[0]?.errors[0]?.code).toBe("WATCH_TOO_SLOW");
        // Closed before it got them all: what it received ends in revision order, with no gap, short of the writes.
        const revisions = watch.envelopes
          .map((e) => fromBinary(AgentDefinitionEventSchema, e.data))
          .filter((e) => e.type !== AgentDefinitionEvent_EventType.BOOKMARK)
          .map((e) => Number(e.revision));
        expect(revisions.length).toBeLessThan(writes);
        expect(revisions).toEqual(Array.from({ length: revisions.length }, (_, i) => start + 1 + i));
      } finally {
        watch.close();
      }
    }, 120_000);
  });

  describe("as an RPC", () => {
    it("streams over gRPC (@grpc/grpc-js) in revision order", async () => {
      const t = await newTenant();
      const start = await listRevision(t);
      const method = AgentDefinitionService.method.watchAgentDefinitions;
      const client = new grpc.Client(`127.0.0.1:${server().port}`, grpc.credentials.createInsecure());
      const metadata = new grpc.Metadata();
      metadata.set("authorization", t.authorization);
      const call = client.makeServerStreamRequest<Message, AgentDefinitionEvent>(
        `/${AgentDefinitionService.typeName}/${method.name}`,
        (m) => Buffer.from(toBinary(WatchAgentDefinitionsRequestSchema, m as WatchAgentDefinitionsRequest)),
        (b) => fromBinary(AgentDefinitionEventSchema, b),
        create(WatchAgentDefinitionsRequestSchema, { since: BigInt(start) }),
        metadata,
      );
      const received: AgentDefinitionEvent[] = [];
      const three = new Promise<void>((resolve, reject) => {
        call.on("data", (event: AgentDefinitionEvent) => {
          if (event.type === AgentDefinitionEvent_EventType.BOOKMARK) return;
          received.push(event);
          if (received.length === 3) resolve();
        });
        call.on("error", (err: grpc.ServiceError) => {
          if (err.code !== grpc.status.CANCELLED) reject(err);
        });
      });
      try {
        const a = await post(t, minimalDefinition({ name: "g1" }));
        await post(t, minimalDefinition({ name: "g2" }));
        await setStatus(t, a.id, "DEPRECATED");
        await three;
        expect(received.map((e) => [e.type, Number(e.revision), e.definition?.name])).toEqual([
          [AgentDefinitionEvent_EventType.ADDED, start + 1, "g1"],
          [AgentDefinitionEvent_EventType.ADDED, start + 2, "g2"],
          [AgentDefinitionEvent_EventType.STATUS_CHANGED, start + 3, "g1"],
        ]);
        // Each as it was read: at the event's revision or later.
        for (const e of received) expect(e.definition?.meta?.modRevision ?? 0n).toBeGreaterThanOrEqual(e.revision);
      } finally {
        call.cancel();
        client.close();
      }
    });

    it("streams over gRPC compressed (gzip) to a client that asks for it", async () => {
      const t = await newTenant();
      const start = await listRevision(t);
      // Events of COMPRESS_MIN_BYTES (64 KiB) and more are compressed: the large definition's, not a bookmark.
      const watch = rawGrpcStream(
        server().baseUrl,
        t.authorization,
        watchPath.slice(1),
        watchRequest({ since: start, bookmark: true }),
        { "grpc-accept-encoding": "gzip" },
      );
      try {
        expect((await watch.headers)["grpc-encoding"]).toBe("gzip");
        await post(t, large(1));
        await post(t, minimalDefinition({ name: "small" }));
        // Periodic bookmarks (WATCH_BOOKMARK_MS 400) may come between the changes.
        const events = await eventually(async () => {
          const decoded = watch.envelopes.map((e) => ({
            compressed: e.flags === 1,
            event: fromBinary(AgentDefinitionEventSchema, e.flags === 1 ? gunzipSync(e.data) : e.data),
          }));
          const changes = decoded.filter((d) => d.event.type !== AgentDefinitionEvent_EventType.BOOKMARK);
          return changes.length >= 2 ? decoded : undefined;
        }, "two changes");
        expect(events[0]?.event.type).toBe(AgentDefinitionEvent_EventType.BOOKMARK);
        expect(
          events
            .filter((d) => d.event.type !== AgentDefinitionEvent_EventType.BOOKMARK)
            .map((d) => [d.compressed, d.event.type, Number(d.event.revision), d.event.definition?.name]),
        ).toEqual([
          [true, AgentDefinitionEvent_EventType.ADDED, start + 1, "large-1"],
          [false, AgentDefinitionEvent_EventType.ADDED, start + 2, "small"],
        ]);
        // Bookmarks are small: never compressed.
        expect(events.filter((d) => d.event.type === AgentDefinitionEvent_EventType.BOOKMARK && d.compressed)).toEqual(
          [],
        );
        expect(events.find((d) => d.compressed)?.event.definition?.skills).toHaveLength(75);
      } finally {
        watch.close();
      }
    });

    it("ends a gRPC watch with DEADLINE_EXCEEDED when its grpc-timeout passes", async () => {
      const t = await newTenant();
      // A raw call: grpc-js would end the call at its own deadline, whatever the service did.
      const started = Date.now();
      const error = await rawGrpcCall(server().baseUrl, t.authorization, watchPath.slice(1), watchRequest({}), {
        headers: { "grpc-timeout": "700m" },
      });
      expect(error?.code).toBe(Code.DeadlineExceeded);
      expect(Date.now() - started).toBeGreaterThanOrEqual(650);
    });

    it("ends a gRPC watch with UNAUTHENTICATED when the token expires", async () => {
      const t = await newTenant();
      const short = await server().bearer({ tenant: t.name, ttlSeconds: 2 });
      const watch = grpcWatch(server, short, { bookmark: true });
      try {
        const { code, error } = await watch.ended;
        expect(code, error?.details).toBe(grpc.status.UNAUTHENTICATED);
        expect(watch.events.length).toBeGreaterThan(0);
      } finally {
        watch.close();
      }
    });

    it("refuses a gRPC watch without a valid token UNAUTHENTICATED, with no event", async () => {
      const watch = grpcWatch(server, "Bearer not-a-token", { bookmark: true });
      try {
        const { code } = await watch.ended;
        expect(code).toBe(grpc.status.UNAUTHENTICATED);
        expect(watch.events).toEqual([]);
      } finally {
        watch.close();
      }
    });

    it("streams over gRPC-Web (binary), bookmark first when asked", async () => {
      const t = await newTenant();
      const transport = createGrpcWebTransport({
        baseUrl: server().baseUrl,
        httpVersion: "1.1",
        interceptors: [withAuthorization(t.authorization)],
      });
      const client = createClient(AgentDefinitionService, transport);
      const start = await listRevision(t);
      const abort = new AbortController();
      const stream = client.watchAgentDefinitions({ since: BigInt(start), bookmark: true }, { signal: abort.signal });
      const iterator = stream[Symbol.asyncIterator]();
      const bookmark = (await iterator.next()).value as AgentDefinitionEvent;
      expect([bookmark.type, Number(bookmark.revision)]).toEqual([AgentDefinitionEvent_EventType.BOOKMARK, start]);
      await post(t, minimalDefinition({ name: "web1" }));
      let event = (await iterator.next()).value as AgentDefinitionEvent;
      while (event.type === AgentDefinitionEvent_EventType.BOOKMARK) event = (await iterator.next()).value;
      expect([event.type, Number(event.revision), event.definition?.name]).toEqual([
        AgentDefinitionEvent_EventType.ADDED,
        start + 1,
        "web1",
      ]);
      abort.abort();
      await iterator.return?.();
    });

    it("streams over Connect (JSON)", async () => {
      const t = await newTenant();
      const transport = createConnectTransport({
        baseUrl: server().baseUrl,
        httpVersion: "1.1",
        useBinaryFormat: false,
        interceptors: [withAuthorization(t.authorization)],
      });
      const client = createClient(AgentDefinitionService, transport);
      const start = await listRevision(t);
      const abort = new AbortController();
      const stream = client.watchAgentDefinitions({ since: BigInt(start) }, { signal: abort.signal });
      const iterator = stream[Symbol.asyncIterator]();
      const first = iterator.next();
      await post(t, minimalDefinition({ name: "c1" }));
      // A periodic BOOKMARK (WATCH_BOOKMARK_MS 400) may come first.
      let event = (await first).value as AgentDefinitionEvent;
      while (event.type === AgentDefinitionEvent_EventType.BOOKMARK) event = (await iterator.next()).value;
      expect([event.type, Number(event.revision), event.definition?.name]).toEqual([
        AgentDefinitionEvent_EventType.ADDED,
        start + 1,
        "c1",
      ]);
      abort.abort();
      await iterator.return?.();
    });
  });

  describe("with the change log compacted to each tenant's last 2 changes every second", () => {
    const compacting = useServerUnder(runtime, db, {
      WATCH_POLL_MS: "50",
      WATCH_RETENTION_COUNT: "2",
      WATCH_COMPACT_SECONDS: "1",
    });

    it("answers 410 REVISION_COMPACTED for a compacted start; list-then-watch misses nothing", async () => {
      const t = await newTenant(undefined, compacting);
      const start = await listRevision(t);
      for (const name of ["c1", "c2", "c3", "c4"]) await post(t, minimalDefinition({ name }));
      const gone = await eventually(
        async () => {
          const res = await fetch(`${t.base}/agentDefinitionEvents?since=${start + 1}`, {
            headers: { authorization: t.authorization },
          });
          if (res.status === 410) return res;
          await res.body?.cancel();
          return undefined;
        },
        `a start at ${start + 1} answered 410`,
      );
      const body = (await gone.json()) as { error: string; errors: { code: string; field: string }[] };
      expect(body.errors[0]).toMatchObject({ code: "REVISION_COMPACTED", field: "since" });
      expect(body.error).toContain(`oldest revision held: ${start + 3}`);
      // The oldest held minus one is still a start.
      const list = await listRevision(t);
      const stream = await openSse(`${t.base}/agentDefinitionEvents?since=${list}`, {
        authorization: t.authorization,
      });
      try {
        await post(t, minimalDefinition({ name: "after" }));
        const [after] = await changes(stream, 1);
        expect(after?.revision).toBe(list + 1);
      } finally {
        stream.close();
      }
    });

    it("answers FAILED_PRECONDITION with REVISION_COMPACTED over gRPC from a compacted start", async () => {
      const t = await newTenant(undefined, compacting);
      const start = await listRevision(t);
      for (const name of ["c1", "c2", "c3"]) await post(t, minimalDefinition({ name }));
      // Until compacted, the watch starts and runs to its deadline: then it is tried again.
      const refused = await eventually(async () => {
        const error = await rawGrpcCall(
          compacting().baseUrl,
          t.authorization,
          watchPath.slice(1),
          watchRequest({ since: start }),
          {
            headers: { "grpc-timeout": "300m" },
          },
        );
        return error?.code === Code.DeadlineExceeded ? undefined : { error };
      }, `a start at ${start} refused`);
      expect(refused.error?.code, refused.error?.message).toBe(Code.FailedPrecondition);
      expect(refused.error?.findDetails(ValidationErrorSchema)[0]?.errors[0]).toMatchObject({
        code: "REVISION_COMPACTED",
        field: "since",
      });
    });

    it("answers FAILED_PRECONDITION to an RPC (Connect) from a compacted start", async () => {
      const t = await newTenant(undefined, compacting);
      const start = await listRevision(t);
      for (const name of ["c1", "c2", "c3"]) await post(t, minimalDefinition({ name }));
      const transport = createConnectTransport({
        baseUrl: compacting().baseUrl,
        httpVersion: "1.1",
        useBinaryFormat: false,
        interceptors: [withAuthorization(t.authorization)],
      });
      const client = createClient(AgentDefinitionService, transport);
      // Until compacted, the stream starts with c1: then it is left and tried again.
      const refused = await eventually(async () => {
        const abort = new AbortController();
        try {
          for await (const _ of client.watchAgentDefinitions({ since: BigInt(start) }, { signal: abort.signal }))
            return undefined;
          return undefined;
        } catch (error) {
          return { error };
        } finally {
          abort.abort();
        }
      }, `a start at ${start} refused`);
      expect(refused.error).toMatchObject({ code: 9 /* FailedPrecondition */ });
    });
  });
});
