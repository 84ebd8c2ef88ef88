/**
 * How many watches may be open (issue 50, item 2), scaled down by the settings: a caller's (WATCH_MAX_PER_TOKEN
 * 3), a tenant's (WATCH_MAX_PER_TENANT 5; over HTTP/1.1, WATCH_MAX_HTTP1_PER_TENANT 4) and the process's
 * (WATCH_MAX_OPEN 8), against a real server on each database, under Node and under Deno: Server-Sent Events
 * with fetch and node:http, gRPC over HTTP/2 by hand, Connect over HTTP/1.1 with its client. Each test opens its
 * watches in tenants of its own and closes them all before the next (the process's count is shared).
 */
import { request as httpRequest } from "node:http";
import { connect as netConnect } from "node:net";
import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterEach, expect, it } from "vitest";
import {
  AgentDefinitionService,
  WatchAgentDefinitionsRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ErrorSchema, ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { withAuthorization } from "../support/auth.js";
import { rawGrpcStream } from "../support/raw-grpc.js";
import { forEachRuntimeAndDatabase, useServerUnder } from "../support/runtimes.js";

/** How a watch attempt went: open (its first bytes came), or refused with a status and the error's code. */
type Outcome = { readonly open: true } | { readonly open: false; readonly status: number; readonly code?: string };

/** An open watch (or a refused one, closed already), whatever its protocol. */
interface Watch {
  readonly outcome: Outcome;
  /** The refusal's Retry-After and Connection headers (REST). */
  readonly headers?: Headers;
  close(): void;
}

const watchPath = `${AgentDefinitionService.typeName}/${AgentDefinitionService.method.watchAgentDefinitions.name}`;

forEachRuntimeAndDatabase((db, runtime) => {
  const server = useServerUnder(runtime, db, {
    WATCH_POLL_MS: "50",
    WATCH_MAX_PER_TOKEN: "3",
    WATCH_MAX_PER_TENANT: "5",
    WATCH_MAX_OPEN: "8",
    WATCH_MAX_HTTP1_PER_TENANT: "4",
    MAX_CONNECTIONS: "20",
  });
  let tenants = 0;
  const opened: Watch[] = [];

  /** A new tenant, and a bearer for it per subject named. */
  const newTenant = async <S extends string>(...subjects: S[]) => {
    const name = `limits${++tenants}`;
    const res = await fetch(`${server().baseUrl}/asor/v1/admin/tenants`, {
      method: "POST",
      headers: { authorization: server().authorization, "content-type": "application/json" },
      body: JSON.stringify({ name, sequencePrefix: "L-" }),
    });
    expect(res.status, await res.clone().text()).toBeLessThan(300);
    const tokens = {} as Record<S, string>;
    for (const subject of subjects) tokens[subject] = await server().bearer({ tenant: name, subject });
    return { name, tokens };
  };

  /** The watches open in the process, as its metrics say. */
  const openWatches = async (): Promise<number> => {
    const text = await (await fetch(`${server().baseUrl}/metrics`)).text();
    return Number(/^asor_watches_open (\d+)$/m.exec(text)?.[1]);
  };
  /** Waits until the process counts `n` watches open: a closed watch is counted out once the server sees it go. */
  const untilOpen = async (n: number): Promise<void> => {
    const until = Date.now() + 10_000;
    while ((await openWatches()) !== n) {
      if (Date.now() > until) throw new Error(`the process still counts ${await openWatches()} watches, not ${n}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };

  afterEach(async () => {
    for (const watch of opened.splice(0)) watch.close();
    await untilOpen(0);
  });

  /** Server-Sent Events with fetch: open once its 200 came (the service answers it after admitting the watch). */
  const sse = async (tenant: string, authorization: string): Promise<Watch> => {
    const abort = new AbortController();
    const res = await fetch(`${server().baseUrl}/api/asor/v1/${tenant}/agentDefinitionEvents`, {
      headers: { accept: "text/event-stream", authorization },
      signal: abort.signal,
    });
    const close = () => abort.abort();
    if (res.status === 200) return keep({ outcome: { open: true }, close });
    const body = (await res.json()) as { code?: string; errors?: { code: string }[] };
    return {
      outcome: { open: false, status: res.status, code: body.code ?? body.errors?.[0]?.code },
      headers: res.headers,
      close,
    };
  };

  /** Binary gRPC over HTTP/2, asking for a BOOKMARK at once: open once its first message came. */
  const grpc = async (authorization: string): Promise<Watch> => {
    const message = toBinary(
      WatchAgentDefinitionsRequestSchema,
      create(WatchAgentDefinitionsRequestSchema, { bookmark: true }),
    );
    const stream = rawGrpcStream(server().baseUrl, authorization, watchPath, message);
    // The first message (the BOOKMARK asked for) or the stream's end, whichever comes first.
    const first = new Promise<void>((resolve) => {
      const look = setInterval(() => {
        if (stream.envelopes.length === 0) return;
        clearInterval(look);
        resolve();
      }, 10);
      void stream.closed.then(() => clearInterval(look));
    });
    const ended = await Promise.race([first.then(() => undefined), stream.closed]);
    if (ended === undefined) return keep({ outcome: { open: true }, close: () => stream.close() });
    return { outcome: refusal(ended.error), close: () => stream.close() };
  };

  /** Connect (binary) over HTTP/1.1, through Connect's router: open once its first message (a BOOKMARK) came. */
  const connect = async (authorization: string): Promise<Watch> => {
    const transport = createConnectTransport({
      baseUrl: server().baseUrl,
      httpVersion: "1.1",
      interceptors: [withAuthorization(authorization)],
    });
    const abort = new AbortController();
    const events = createClient(AgentDefinitionService, transport).watchAgentDefinitions(
      { bookmark: true },
      { signal: abort.signal },
    );
    const iterator = events[Symbol.asyncIterator]();
    try {
      await iterator.next();
      return keep({ outcome: { open: true }, close: () => abort.abort() });
    } catch (err) {
      return { outcome: refusal(ConnectError.from(err)), close: () => abort.abort() };
    }
  };

  const keep = (watch: Watch): Watch => {
    opened.push(watch);
    return watch;
  };

  /** An RPC's refusal: its code, and the code of the registry's error detail. */
  const refusal = (error: ConnectError | undefined): Outcome => ({
    open: false,
    status: error?.code ?? 0,
    code: error?.findDetails(ValidationErrorSchema)[0]?.errors[0]?.code ?? error?.findDetails(ErrorSchema)[0]?.code,
  });

  const open: Outcome = { open: true };

  it("refuses a caller's watch past WATCH_MAX_PER_TOKEN on every surface, serves another caller, " +
    "and frees a place on close", async () => {
    const t = await newTenant("alice", "bob");
    const first = await sse(t.name, t.tokens.alice);
    expect([first.outcome, (await grpc(t.tokens.alice)).outcome, (await connect(t.tokens.alice)).outcome]).toEqual([
      open,
      open,
      open,
    ]);
    // The fourth, whatever its protocol.
    const refusedSse = await sse(t.name, t.tokens.alice);
    expect(refusedSse.outcome).toEqual({ open: false, status: 429, code: "TOO_MANY_WATCHES" });
    // A refused SSE watch does not keep its HTTP/1.1 connection.
    expect(refusedSse.headers?.get("connection")).toBe("close");
    expect((await grpc(t.tokens.alice)).outcome).toEqual({
      open: false,
      status: Code.ResourceExhausted,
      code: "TOO_MANY_WATCHES",
    });
    expect((await connect(t.tokens.alice)).outcome).toEqual({
      open: false,
      status: Code.ResourceExhausted,
      code: "TOO_MANY_WATCHES",
    });
    // Another token of the same tenant is served.
    expect((await sse(t.name, t.tokens.bob)).outcome).toEqual(open);
    await untilOpen(4);
    // Closing one of the caller's watches frees its place.
    first.close();
    await untilOpen(3);
    expect((await grpc(t.tokens.alice)).outcome).toEqual(open);
  }, 60_000);

  it("gives a watch's place back when it fails to start", async () => {
    // A token for a tenant that was never set up: each watch is admitted, then fails (TENANT_NOT_FOUND).
    const missing = await server().bearer({ tenant: "never-set-up", subject: "alice" });
    const outcomes = [];
    for (let i = 0; i < 4; i++) outcomes.push((await sse("never-set-up", missing)).outcome);
    expect(outcomes).toEqual(Array(4).fill({ open: false, status: 404, code: "TENANT_NOT_FOUND" }));
    expect(await openWatches()).toBe(0);
  });

  it("holds a tenant to WATCH_MAX_PER_TENANT and the process to WATCH_MAX_OPEN, serving other tenants " +
    "meanwhile", async () => {
    const busy = await newTenant("a", "b");
    for (const token of [busy.tokens.a, busy.tokens.a, busy.tokens.a, busy.tokens.b, busy.tokens.b])
      expect((await grpc(token)).outcome).toEqual(open);
    // The tenant is at its share: its next watch is refused, whoever asks.
    expect((await grpc(busy.tokens.b)).outcome).toEqual({
      open: false,
      status: Code.ResourceExhausted,
      code: "TOO_MANY_WATCHES",
    });
    expect((await sse(busy.name, busy.tokens.b)).outcome).toEqual({
      open: false,
      status: 429,
      code: "TOO_MANY_WATCHES",
    });
    // Another tenant is served beside it, up to the process's 8.
    const other = await newTenant("c", "d");
    for (const token of [other.tokens.c, other.tokens.c, other.tokens.d])
      expect((await grpc(token)).outcome).toEqual(open);
    const full = await sse(other.name, other.tokens.d);
    expect(full.outcome).toEqual({ open: false, status: 503, code: "WATCHES_FULL" });
    expect(full.headers?.get("retry-after")).toBe("5");
    expect((await grpc(other.tokens.d)).outcome).toEqual({
      open: false,
      status: Code.ResourceExhausted,
      code: "WATCHES_FULL",
    });
    // A place freed by the busy tenant goes to whoever asks next.
    opened[0]?.close();
    await untilOpen(7);
    expect((await grpc(other.tokens.d)).outcome).toEqual(open);
  }, 60_000);

  it("holds a tenant's HTTP/1.1 watches to WATCH_MAX_HTTP1_PER_TENANT, so other tenants still get " +
    "connections", async () => {
    const busy = await newTenant("e", "f", "g", "h");
    const tokens = Object.values<string>(busy.tokens);
    // As many SSE watches as the server takes connections (MAX_CONNECTIONS 20), each on a connection of its own.
    const outcomes: string[] = [];
    for (let i = 0; i < 20; i++) outcomes.push(await rawSse(busy.name, tokens[i % tokens.length] as string));
    expect(outcomes).toEqual([...Array(4).fill("200"), ...Array(16).fill("429 close")]);
    // Another tenant's list, on a connection of its own.
    const other = await newTenant("i");
    const list = await rawGet(`/api/asor/v1/${other.name}/agentDefinition`, other.tokens.i);
    expect(list).toBe("200");
  }, 60_000);

  it("answers a caller's SSE watch past its limit from its first bytes exactly as the operation does, " +
    "and admits another token's meanwhile", async () => {
    const t = await newTenant("alice", "bob");
    for (let i = 0; i < 3; i++) expect(await rawSse(t.name, t.tokens.alice)).toBe("200");
    const path = `/api/asor/v1/${t.name}/agentDefinitionEvents`;
    const ask = (target: string, extra = "") =>
      exchange(
        `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n` +
          `Authorization: ${t.tokens.alice}\r\nX-Request-Id: early-1\r\n${extra}\r\n`,
      );
    const early = async () => Number(/^asor_watches_refused_early_total (\d+)$/m.exec(await metricsText())?.[1]);
    const before = await early();
    // The first refusal is the operation's; the next ones of that path and token are answered from their first
    // bytes, with the very same status, headers (but the date) and body.
    const byOperation = await ask(path);
    expect(await early()).toBe(before);
    const fromFirstBytes = await ask(`${path}?since=0`);
    expect(await early()).toBe(before + 1);
    const withoutDate = (answer: string) => answer.replace(/^date: .*$/im, "date: -");
    expect(byOperation).toMatch(/^HTTP\/1\.1 429 Too Many Requests\r\n/);
    expect(byOperation).toMatch(/^connection: close$/im);
    expect(byOperation).toMatch(/^x-request-id: early-1$/im);
    expect(byOperation).toContain('"code":"TOO_MANY_WATCHES"');
    expect(withoutDate(fromFirstBytes)).toBe(withoutDate(byOperation));
    // A request this reader does not read plainly goes the usual way, and is answered as before.
    const resumed = await ask(path, "Last-Event-ID: 0\r\n");
    expect(withoutDate(resumed)).toBe(withoutDate(byOperation));
    expect(await early()).toBe(before + 1);
    // Two request ids: neither is taken, either way (a new id is made).
    const withoutId = (answer: string) => withoutDate(answer).replace(/^x-request-id: [0-9a-f-]{36}$/im, "id: new");
    const twoIds = await ask(path, "X-Request-Id: early-2\r\n");
    const twoIdsResumed = await ask(path, "X-Request-Id: early-2\r\nLast-Event-ID: 0\r\n");
    expect(await early()).toBe(before + 2);
    expect(twoIds).not.toMatch(/early-/);
    expect(withoutId(twoIds)).toBe(withoutId(twoIdsResumed));
    expect(withoutId(twoIds)).toBe(
      withoutId(byOperation.replace("x-request-id: early-1", `x-request-id: ${"0".repeat(36)}`)),
    );
    // Another token of the tenant is admitted meanwhile.
    expect(await rawSse(t.name, t.tokens.bob)).toBe("200");
  }, 60_000);

  it("takes a burst of one token's SSE watches in turns: its places reach the operation, the rest is refused " +
    "from its first bytes, and a burst that fails to start is never refused", async () => {
    const t = await newTenant("carol");
    const early = async () => Number(/^asor_watches_refused_early_total (\d+)$/m.exec(await metricsText())?.[1]);
    const before = await early();
    const outcomes = await Promise.all(Array.from({ length: 12 }, () => rawSse(t.name, t.tokens.carol)));
    expect(outcomes.sort()).toEqual([...Array(3).fill("200"), ...Array(9).fill("429 close")]);
    // One refusal by the operation, the other eight from their first bytes.
    expect(await early()).toBe(before + 8);
    // Watches of a tenant never set up are admitted and fail to start: each goes on in its turn, none is refused.
    const missing = await server().bearer({ tenant: "never-set-up", subject: "carol" });
    const failed = await Promise.all(Array.from({ length: 8 }, () => rawSse("never-set-up", missing)));
    expect(failed.map((outcome) => outcome.split(" ")[0])).toEqual(Array(8).fill("404"));
  }, 60_000);

  const metricsText = async (): Promise<string> => (await fetch(`${server().baseUrl}/metrics`)).text();

  /** `request` written on a connection of its own, and everything read from it until the server closed it. */
  const exchange = (request: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const url = new URL(server().baseUrl);
      const chunks: Buffer[] = [];
      const socket = netConnect({ host: url.hostname, port: Number(url.port) }, () => socket.write(request));
      socket.on("data", (chunk: Buffer) => chunks.push(chunk));
      socket.on("error", reject);
      socket.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")));
    });

  /** An SSE watch on a connection of its own (node:http, no agent): "200", kept open, or its status and "close". */
  const rawSse = (tenant: string, authorization: string): Promise<string> =>
    new Promise((resolve) => {
      const req = httpRequest(`${server().baseUrl}/api/asor/v1/${tenant}/agentDefinitionEvents`, {
        agent: false,
        headers: { accept: "text/event-stream", authorization },
      });
      req.on("error", (err) => resolve(`error ${(err as NodeJS.ErrnoException).code}`));
      req.on("response", (res) => {
        if (res.statusCode === 200) {
          keep({ outcome: open, close: () => req.destroy() });
          return resolve("200");
        }
        res.resume();
        res.on("end", () => resolve(`${res.statusCode} ${res.headers.connection}`));
      });
      req.end();
    });

  /** A GET on a connection of its own: its status, or the socket's error. */
  const rawGet = (path: string, authorization: string): Promise<string> =>
    new Promise((resolve) => {
      const req = httpRequest(`${server().baseUrl}${path}`, { agent: false, headers: { authorization } });
      req.on("error", (err) => resolve(`error ${(err as NodeJS.ErrnoException).code}`));
      req.on("response", (res) => {
        res.resume();
        res.on("end", () => resolve(String(res.statusCode)));
      });
      req.end();
    });
});
