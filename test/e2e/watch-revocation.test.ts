/**
 * A watch keeps checking its token (issue 50, item 4): with a real OpenID provider whose introspection answers
 * carry no `exp` (the audit's issuer), a watch opened with an opaque token ends with UNAUTHENTICATED within
 * WATCH_TOKEN_RECHECK_MS of the token's revocation, over Server-Sent Events, the lean gRPC watch and Connect's
 * router; and one token's watches cost the issuer one introspection per interval, however many they are. The
 * introspection cache stays on (AUTH_INTROSPECTION_CACHE_SECONDS, default 10 s, far longer than the interval): a
 * recheck does not read it, and drops the revoked token from it. An issuer that fails to answer ends no watch.
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AgentDefinitionEvent,
  AgentDefinitionEventSchema,
  AgentDefinitionService,
  type WatchAgentDefinitionsRequest,
  WatchAgentDefinitionsRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { withAuthorization } from "../support/auth.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import {
  AUDIENCE,
  OPAQUE_RESOURCE,
  startOidcProvider,
  type TestClient,
  type TestIssuer,
} from "../support/oidc-provider.js";
import { startServer, type TestServer } from "../support/server.js";

const RECHECK_MS = 400;
/** How long after a revocation a watch may take to end: the interval, the check itself, and the way out. */
const ENDS_WITHIN_MS = RECHECK_MS + 1_500;
const INTROSPECTION = "/token/introspection";

describe("a watch whose opaque token is revoked, at an issuer that answers no exp", () => {
  const watcher: TestClient = {
    clientId: "watcher",
    clientSecret: "watcher-secret-0123456789",
    tenant: "default",
    domains: ["Development"],
  };
  let issuer: TestIssuer;
  let database: FreshDatabase;
  let server: TestServer & { stop(): Promise<void> };
  /** A new opaque token of the watcher's, as a bearer. */
  const opaque = async () => `Bearer ${await issuer.token(watcher, { resource: OPAQUE_RESOURCE })}`;
  const revoke = (bearer: string) => issuer.revoke(watcher, bearer.slice("Bearer ".length));

  beforeAll(async () => {
    issuer = await startOidcProvider([watcher]);
    // The audit's issuer: an active answer without an expiry, so only a recheck can end the watch.
    issuer.faults.introspectionAnswer = ({ exp: _exp, ...answer }) => answer;
    database = await testDatabases()[0]!.create();
    server = await startServer(database, {
      AUTH_ISSUER: issuer.issuer,
      AUTH_ALLOW_HTTP_ISSUER: "true",
      AUTH_AUDIENCE: AUDIENCE,
      AUTH_INTROSPECTION_CLIENT_ID: issuer.introspector.clientId,
      AUTH_INTROSPECTION_CLIENT_SECRET: issuer.introspector.clientSecret,
      WATCH_TOKEN_RECHECK_MS: String(RECHECK_MS),
      WATCH_POLL_MS: "50",
      WATCH_BOOKMARK_MS: "100",
    });
  });
  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
    await issuer?.close();
  });

  /** An SSE watch read with fetch: `opened` once its first event came, `ended` with all its text once it ends. */
  const sseWatch = (bearer: string) => {
    const abort = new AbortController();
    let text = "";
    let sawEvent: () => void = () => {};
    const opened = new Promise<void>((resolve) => {
      sawEvent = resolve;
    });
    const ended = (async () => {
      const res = await fetch(`${server.baseUrl}/asor/v1/agentDefinitionEvents?bookmark=true`, {
        headers: { authorization: bearer, accept: "text/event-stream" },
        signal: abort.signal,
      });
      expect(res.status).toBe(200);
      const decoder = new TextDecoder();
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        text += decoder.decode(chunk, { stream: true });
        if (text.includes("\n\n")) sawEvent();
      }
      return { text, at: Date.now() };
    })();
    // A watch the test closes rejects (aborted): only a test that awaits `ended` reads how it ended.
    ended.catch(() => {});
    return { opened, ended, close: () => abort.abort() };
  };

  /** `promise`, or a failure naming `what` after `ms`: a watch that goes on after its token was revoked. */
  const within = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    return Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not end within ${ms} ms of the revocation`)), ms);
      }),
    ]).finally(() => clearTimeout(timer));
  };

  /** The last SSE event of a stream's text: its `event` and parsed `data`. */
  const lastEvent = (text: string) => {
    const blocks = text.split("\n\n").filter((block) => block.includes("data:"));
    const block = blocks.at(-1) ?? "";
    const field = (name: string) =>
      block
        .split("\n")
        .find((line) => line.startsWith(`${name}:`))
        ?.slice(name.length + 1)
        .trim();
    return { event: field("event"), data: JSON.parse(field("data") ?? "null") as unknown };
  };

  it("over Server-Sent Events: an error event UNAUTHENTICATED, and the token refused at once after", async () => {
    const bearer = await opaque();
    const watch = sseWatch(bearer);
    try {
      await watch.opened;
      await revoke(bearer);
      const revokedAt = Date.now();
      const { text, at } = await within(watch.ended, ENDS_WITHIN_MS, "the SSE watch");
      expect(at - revokedAt).toBeLessThan(ENDS_WITHIN_MS);
      const last = lastEvent(text);
      expect(last.event).toBe("error");
      expect(last.data).toMatchObject({ errors: [{ code: "UNAUTHENTICATED" }] });
      expect(JSON.stringify(last.data)).toMatch(/no longer accepted \(The bearer token is not active\)/);
      // The recheck dropped the token from the cache (kept 10 s otherwise): a new request is refused at once.
      const list = await fetch(`${server.baseUrl}/asor/v1/agentDefinition`, { headers: { authorization: bearer } });
      expect(list.status).toBe(401);
    } finally {
      watch.close();
    }
  });

  it("over the lean gRPC watch (@grpc/grpc-js): grpc-status 16 UNAUTHENTICATED", async () => {
    const bearer = await opaque();
    const client = new grpc.Client(`127.0.0.1:${server.port}`, grpc.credentials.createInsecure());
    const metadata = new grpc.Metadata();
    metadata.set("authorization", bearer);
    const call = client.makeServerStreamRequest<WatchAgentDefinitionsRequest, AgentDefinitionEvent>(
      `/${AgentDefinitionService.typeName}/${AgentDefinitionService.method.watchAgentDefinitions.name}`,
      (m) => Buffer.from(toBinary(WatchAgentDefinitionsRequestSchema, m)),
      (b) => fromBinary(AgentDefinitionEventSchema, b),
      create(WatchAgentDefinitionsRequestSchema, { bookmark: true }),
      metadata,
    );
    call.on("error", () => {});
    const first = new Promise((resolve) => call.once("data", resolve));
    const status = new Promise<grpc.StatusObject>((resolve) => call.on("status", resolve));
    try {
      await first;
      await revoke(bearer);
      const revokedAt = Date.now();
      const { code, details } = await within(status, ENDS_WITHIN_MS, "the gRPC watch");
      expect(Date.now() - revokedAt).toBeLessThan(ENDS_WITHIN_MS);
      expect(code, details).toBe(grpc.status.UNAUTHENTICATED);
      expect(details).toMatch(/no longer accepted/);
    } finally {
      call.cancel();
      client.close();
    }
  });

  it("over Connect (JSON, Connect's router): Connect's UNAUTHENTICATED error", async () => {
    const bearer = await opaque();
    const client = createClient(
      AgentDefinitionService,
      createConnectTransport({
        baseUrl: server.baseUrl,
        httpVersion: "1.1",
        useBinaryFormat: false,
        interceptors: [withAuthorization(bearer)],
      }),
    );
    const abort = new AbortController();
    const iterator = client.watchAgentDefinitions({ bookmark: true }, { signal: abort.signal })[Symbol.asyncIterator]();
    try {
      await iterator.next();
      await revoke(bearer);
      const revokedAt = Date.now();
      const drained = (async () => {
        try {
          while (!(await iterator.next()).done);
          return undefined;
        } catch (error: unknown) {
          return ConnectError.from(error);
        }
      })();
      const error = await within(drained, ENDS_WITHIN_MS, "the Connect watch");
      expect(Date.now() - revokedAt).toBeLessThan(ENDS_WITHIN_MS);
      expect(error?.code, error?.message).toBe(Code.Unauthenticated);
    } finally {
      abort.abort();
    }
  });

  it("goes on while the issuer does not answer its rechecks, and ends once it answers inactive", async () => {
    const bearer = await opaque();
    const watch = sseWatch(bearer);
    const answered = issuer.faults.introspectionAnswer;
    try {
      await watch.opened;
      // An answer that is no introspection answer: the registry cannot tell, as when the issuer is down (503).
      issuer.faults.introspectionAnswer = () => ({ active: "perhaps" });
      const before = issuer.requests(INTROSPECTION);
      await new Promise((resolve) => setTimeout(resolve, 3 * RECHECK_MS));
      // Asked and failed (503 to the registry), and the watch still open.
      expect(issuer.requests(INTROSPECTION) - before).toBeGreaterThanOrEqual(2);
      const open = await Promise.race([watch.ended.then(() => false), new Promise((r) => setTimeout(r, 50, true))]);
      expect(open).toBe(true);
      issuer.faults.introspectionAnswer = answered;
      await revoke(bearer);
      const { text } = await within(watch.ended, ENDS_WITHIN_MS, "the SSE watch");
      expect(lastEvent(text).data).toMatchObject({ errors: [{ code: "UNAUTHENTICATED" }] });
    } finally {
      issuer.faults.introspectionAnswer = answered;
      watch.close();
    }
  });

  it("asks the issuer once per interval for all the watches of one token, and ends them all", async () => {
    const bearer = await opaque();
    const watches = Array.from({ length: 6 }, () => sseWatch(bearer));
    try {
      await Promise.all(watches.map((w) => w.opened));
      const before = issuer.requests(INTROSPECTION);
      const window = 5 * RECHECK_MS;
      await new Promise((resolve) => setTimeout(resolve, window));
      const asked = issuer.requests(INTROSPECTION) - before;
      // One recheck per interval (the first an interval after the first watch): 4 to 6 in 5 intervals. A recheck
      // per watch would be six times that.
      expect(asked).toBeGreaterThanOrEqual(3);
      expect(asked).toBeLessThanOrEqual(window / RECHECK_MS + 1);
      await revoke(bearer);
      const ends = await within(Promise.all(watches.map((w) => w.ended)), ENDS_WITHIN_MS, "the six SSE watches");
      for (const { text } of ends)
        expect(lastEvent(text).data).toMatchObject({ errors: [{ code: "UNAUTHENTICATED" }] });
    } finally {
      for (const w of watches) w.close();
    }
  });
});
