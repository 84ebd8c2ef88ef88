/**
 * The registry mounted in an express 5 app (src/main/express.ts, the package's `./express` export), beside the
 * app's own routes, on a real port: REST, Connect and gRPC-Web through express, with a token of the local
 * development issuer; the same errors and the one token check per request as on the registry's own server; the
 * app's other routes, and the paths the registry does not serve, left to express; a mount path; the drain.
 */

import { existsSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import { fromJson, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import express from "express";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { AgentDefinitionService } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import packageJson from "../../package.json" with { type: "json" };
import type { Authenticator } from "../../src/auth/authenticator.js";
import { createRegistryMiddleware, type RegistryMiddleware } from "../../src/main/express.js";
import { listen } from "../../src/node/node-server.js";
import { withAuthorization } from "../support/auth.js";
import { capturingLogger } from "../support/capturing-logger.js";
import { type Card, verifiesWithA2a } from "../support/card-signatures.js";
import { type FreshDatabase, forEachDatabase, type TestDatabase } from "../support/databases.js";
import { exampleDefinition, minimalDefinition, withoutReadOnly } from "../support/definitions.js";
import { devTokenHttp1, errorCode, nonLoopbackIPv4 } from "../support/dev-sign-in.js";
import { localBearer, testConfig } from "../support/server.js";

const CONTRACT_PATH = "/asor/v1/agentDefinition";
const TENANT_PATH = "/api/asor/v1/default/agentDefinition";

/** An express app of `setup`'s routes, listening on a port of `address` (by default a loopback one). */
async function serve(
  setup: (host: express.Express) => void,
  address = "127.0.0.1",
): Promise<{ baseUrl: string; server: Server; port: number }> {
  const host = express();
  setup(host);
  const server = createServer(host);
  const port = await listen(server as never, 0, address);
  return { baseUrl: `http://${address}:${port}`, server, port };
}

function stop(server: Server | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (server === undefined) return resolve();
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/**
 * The express app of these tests: the registry at the root and under /registry, and routes of the host's own
 * after it (one with a body parser of its own).
 */
function useExpressRegistry(db: TestDatabase) {
  const state: {
    database?: FreshDatabase;
    registry?: RegistryMiddleware;
    server?: Server;
    baseUrl?: string;
    authorization?: string;
    verifications: number;
    logger: ReturnType<typeof capturingLogger>;
  } = { verifications: 0, logger: capturingLogger() };
  const counting = (inner: Authenticator): Authenticator => ({
    description: inner.description,
    recheck: (authorization) => inner.recheck(authorization),
    authenticate: (authorization) => {
      state.verifications++;
      return inner.authenticate(authorization);
    },
  });
  beforeAll(async () => {
    state.database = await db.create();
    // A body deadline far below the default, for the test of a body that stalls.
    const config = testConfig(state.database, { HTTP_BODY_TIMEOUT_MS: "500" });
    state.registry = await createRegistryMiddleware(config, { logger: state.logger, wrapAuthenticator: counting });
    const registry = state.registry;
    const served = await serve((host) => {
      host.use(registry);
      host.use("/registry", registry);
      host.get("/hello", (_req, res) => void res.json({ hello: "from express" }));
      host.post("/echo", express.json(), (req, res) => void res.json({ echoed: req.body }));
    });
    state.server = served.server;
    state.baseUrl = served.baseUrl;
    state.authorization = await (await localBearer(config))({ platformAdmin: true });
  });
  afterAll(async () => {
    await stop(state.server);
    await state.registry?.close();
    await state.database?.cleanup();
  });
  afterEach(() => {
    state.verifications = 0;
  });
  return () => {
    const { registry, baseUrl, authorization } = state;
    if (registry === undefined || baseUrl === undefined || authorization === undefined)
      throw new Error("The express app is only available inside tests of its suite.");
    return { ...state, registry, baseUrl, authorization };
  };
}

forEachDatabase((db) => {
  const host = useExpressRegistry(db);
  const rest = (path: string, init: RequestInit = {}, authorization: string | null = host().authorization) =>
    fetch(`${host().baseUrl}${path}`, {
      ...init,
      headers: { ...(authorization === null ? {} : { authorization }), ...(init.headers as Record<string, string>) },
    });
  const postJson = (path: string, body: unknown, authorization?: string | null) =>
    rest(
      path,
      { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) },
      authorization,
    );

  describe("REST through express", () => {
    it("creates, reads and lists definitions, the token checked once per request", async () => {
      const example = exampleDefinition();
      const created = await postJson(TENANT_PATH, example);
      expect(created.status).toBe(201);
      const body = await created.json();
      expect(created.headers.get("location")).toBe(`${TENANT_PATH}/${body.id}`);
      expect(created.headers.get("x-request-id")).toMatch(/./);
      const read = await rest(`${CONTRACT_PATH}/${body.id}`);
      expect(read.status).toBe(200);
      expect(withoutReadOnly(await read.json())).toEqual(example);
      const list = await (await rest(`${TENANT_PATH}?limit=100`)).json();
      expect(list.data.map((d: { id: string }) => d.id)).toContain(body.id);
      expect(host().verifications).toBe(3);
    });

    it("answers 401 without a token, with the Bearer challenge and the spec's error body", async () => {
      const res = await postJson(CONTRACT_PATH, minimalDefinition(), null);
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe('Bearer realm="asor"');
      const body = await res.json();
      expect(typeof body.error).toBe("string");
      expect(body.errors[0]).toMatchObject({ code: "UNAUTHENTICATED" });
    });

    it("answers 400 listing every mistake with code, field and path", async () => {
      const res = await postJson(CONTRACT_PATH, { ...minimalDefinition(), name: "", colour: "blue" });
      expect(res.status).toBe(400);
      const body = await res.json();
      expect(typeof body.error).toBe("string");
      expect(body.errors.map((e: { code: string; path: string }) => [e.code, e.path])).toEqual([
        ["UNKNOWN_FIELD", "colour"],
      ]);
      const invalid = await (await postJson(CONTRACT_PATH, minimalDefinition({ name: "", url: "nope" }))).json();
      expect(invalid.errors.map((e: { code: string; field: string }) => [e.code, e.field])).toEqual([
        ["REQUIRED", "name"],
        ["INVALID_URI", "url"],
      ]);
    });

    it(
      "keeps the registry's limits: 413 past MAX_BODY_BYTES, " + "408 for a body that stalls, in the spec's shape",
      async () => {
        const huge = await rest(CONTRACT_PATH, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(minimalDefinition({ description: "x".repeat(host().registry.app.config.maxBodyBytes) })),
        });
        expect(huge.status).toBe(413);
        expect((await huge.json()).errors[0].code).toBe("PAYLOAD_TOO_LARGE");

        // Ten thousand bytes announced, a few sent, then the client holds on: answered, and the connection closed.
        const socket = connect(Number(new URL(host().baseUrl).port), "127.0.0.1");
        socket.write(
          `POST ${CONTRACT_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: ${host().authorization}\r\n` +
            'Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n{"name": "x',
        );
        const received = await new Promise<string>((resolve) => {
          let text = "";
          socket.on("data", (chunk: Buffer) => void (text += chunk.toString("utf8")));
          socket.on("error", () => undefined);
          socket.once("close", () => resolve(text));
        });
        expect(received).toMatch(/^HTTP\/1\.1 408 /);
        expect(JSON.parse(received.slice(received.indexOf("\r\n\r\n") + 4)).errors[0].code).toBe("REQUEST_TIMEOUT");
      },
    );

    it("serves signed cards and the JWKS that verifies them, at the root and under /registry", async () => {
      const def = { ...exampleDefinition(), name: "Signed In Express", externalAgentID: "ext-express-signed" };
      const created = await postJson(CONTRACT_PATH, def);
      const { id } = (await created.json()) as { id: string };
      for (const base of ["", "/registry"]) {
        const card = await rest(`${base}${CONTRACT_PATH}/${id}/agentCard`);
        expect(card.status).toBe(200);
        expect(await verifiesWithA2a(`${host().baseUrl}${base}`, (await card.json()) as Card)).toBe(true);
      }
    });

    it("serves the registry's plain endpoints (probes, OpenAPI) and its 405s", async () => {
      expect((await rest("/healthz", {}, null)).status).toBe(200);
      const health = createClient(Health, createConnectTransport({ baseUrl: host().baseUrl, httpVersion: "1.1" }));
      expect((await health.check({})).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
      expect((await (await rest("/openapi.json", {}, null)).json()).openapi).toMatch(/^3\./);
      const wrongVerb = await rest(CONTRACT_PATH, { method: "DELETE" });
      expect(wrongVerb.status).toBe(405);
      expect(wrongVerb.headers.get("allow")).toMatch(/POST/);
    });
  });

  const transports: [string, (baseUrl: string, authorization?: string) => Transport][] = [
    [
      "Connect",
      (baseUrl, authorization) =>
        createConnectTransport({
          baseUrl,
          httpVersion: "1.1",
          interceptors: authorization === undefined ? [] : [withAuthorization(authorization)],
        }),
    ],
    [
      "gRPC-Web",
      (baseUrl, authorization) =>
        createGrpcWebTransport({
          baseUrl,
          httpVersion: "1.1",
          interceptors: authorization === undefined ? [] : [withAuthorization(authorization)],
        }),
    ],
  ];

  describe.each(transports)("%s through express", (name, transport) => {
    /** A client of `transport` (`authorization` null: without a token) to the express app's root or `path`. */
    const client = (authorization: string | null = host().authorization, path = "") =>
      createClient(AgentDefinitionService, transport(`${host().baseUrl}${path}`, authorization ?? undefined));

    it("upserts, gets and lists, the token checked once per call", async () => {
      const def = minimalDefinition({ version: `express-${name}` });
      const created = await client().upsertAgentDefinition({
        agentCardAndTools: fromJson(AgentDefinitionSchema, def as never),
      });
      expect(withoutReadOnly(toJson(AgentDefinitionSchema, created) as Record<string, unknown>)).toEqual(def);
      expect(await client().getAgentDefinition({ id: created.id })).toEqual(created);
      const list = await client().listAgentDefinitions({ limit: 100 });
      expect(list.data.map((d) => d.id)).toContain(created.id);
      expect(host().verifications).toBe(3);
    });

    it(
      "answers Unauthenticated without a token, " + "and InvalidArgument with the validation error as a detail",
      async () => {
        const refused = await client(null)
          .listAgentDefinitions({})
          .catch((e: unknown) => e);
        expect(refused).toBeInstanceOf(ConnectError);
        expect((refused as ConnectError).code).toBe(Code.Unauthenticated);
        const [auth] = (refused as ConnectError).findDetails(ValidationErrorSchema);
        expect(auth?.errors[0]).toMatchObject({ code: "UNAUTHENTICATED" });

        const invalid = await client()
          .upsertAgentDefinition({
            agentCardAndTools: fromJson(AgentDefinitionSchema, minimalDefinition({ name: "" }) as never),
          })
          .catch((e: unknown) => e);
        expect((invalid as ConnectError).code).toBe(Code.InvalidArgument);
        const [detail] = (invalid as ConnectError).findDetails(ValidationErrorSchema);
        expect(detail?.errors.map((e) => [e.code, e.path])).toEqual([["REQUIRED", "name"]]);
      },
    );

    it("is reached under the mount path /registry as well", async () => {
      const written = await client(host().authorization, "/registry").upsertAgentDefinition({
        agentCardAndTools: fromJson(AgentDefinitionSchema, minimalDefinition({ version: `mounted-${name}` }) as never),
      });
      expect(await client().getAgentDefinition({ id: written.id })).toEqual(written);
    });
  });

  describe("beside the host's own routes", () => {
    it("leaves every path it does not serve to express: the host's routes, and express's own 404", async () => {
      const hello = await rest("/hello", {}, null);
      expect(hello.status).toBe(200);
      expect(await hello.json()).toEqual({ hello: "from express" });
      // The host's body parser, on its own route after the registry, reads its own body.
      const echo = await postJson("/echo", { a: 1 }, null);
      expect(await echo.json()).toEqual({ echoed: { a: 1 } });
      // Not the registry's 404 (JSON in the spec's shape): express's own.
      const unknown = await rest("/asor/v1/nothing-here", {}, null);
      expect(unknown.status).toBe(404);
      expect(unknown.headers.get("content-type")).toMatch(/^text\/html/);
      expect(await unknown.text()).toContain("Cannot GET /asor/v1/nothing-here");
      expect(host().verifications).toBe(0);
    });

    it("under a mount path, names a created instance where the client reaches it", async () => {
      const created = await postJson(`/registry${CONTRACT_PATH}`, minimalDefinition({ version: "mounted" }));
      expect(created.status).toBe(201);
      const { id } = await created.json();
      const location = created.headers.get("location");
      expect(location).toBe(`/registry${CONTRACT_PATH}/${id}`);
      expect((await rest(location as string)).status).toBe(200);
    });

    it("does not serve gRPC over HTTP/2 (that needs the registry's own server), and the host lives on", async () => {
      const grpc = createClient(
        AgentDefinitionService,
        createGrpcTransport({ baseUrl: host().baseUrl, interceptors: [withAuthorization(host().authorization)] }),
      );
      await expect(grpc.listAgentDefinitions({})).rejects.toBeInstanceOf(ConnectError);
      expect((await rest("/hello", {}, null)).status).toBe(200);
    });
  });

  describe("the development sign-in through express", () => {
    const address = nonLoopbackIPv4();
    const noAddress = address === undefined ? " (skipped: this machine has no IPv4 address that is not loopback)" : "";

    it("answers a request on the host's loopback address, at the root and under a mount path", async () => {
      const { port } = new URL(host().baseUrl);
      for (const path of ["/ui/dev-token", "/registry/ui/dev-token"])
        expect((await devTokenHttp1("127.0.0.1", Number(port), [`127.0.0.1:${port}`], {}, path)).status).toBe(200);
      // A host listening on :: sees 127.0.0.1 mapped into IPv6 (::ffff:127.0.0.1), and ::1.
      const { registry } = host();
      const dual = await serve((app) => void app.use(registry), "::");
      try {
        expect((await devTokenHttp1("127.0.0.1", dual.port, [`127.0.0.1:${dual.port}`])).status).toBe(200);
        expect((await devTokenHttp1("::1", dual.port, [`[::1]:${dual.port}`])).status).toBe(200);
      } finally {
        await stop(dual.server);
      }
    });

    it.skipIf(address === undefined)(
      `refuses one on a host address that is not loopback, though HOST is and Host says 127.0.0.1${noAddress}`,
      async () => {
        expect(host().registry.app.config.host).toBe("127.0.0.1");
        const { registry } = host();
        const gateway = await serve((app) => {
          app.use(registry);
          app.use("/registry", registry);
        }, address);
        try {
          for (const path of ["/ui/dev-token", "/registry/ui/dev-token"]) {
            const answer = await devTokenHttp1(
              address as string,
              gateway.port,
              [`127.0.0.1:${gateway.port}`],
              {},
              path,
            );
            expect(answer.status).toBe(403);
            expect(errorCode(answer)).toBe("PERMISSION_DENIED");
          }
        } finally {
          await stop(gateway.server);
        }
      },
    );
  });

  describe("a second middleware on the same registry", () => {
    it("refuses, in the spec's shape, a body a parser read before it, saying why to caller and log", async () => {
      const registry = await createRegistryMiddlewareOf(host().registry);
      const { server, baseUrl } = await serve((h) => {
        h.use(express.json());
        h.use(registry);
      });
      try {
        const res = await fetch(`${baseUrl}${CONTRACT_PATH}?x=1`, {
          method: "POST",
          headers: { authorization: host().authorization, "content-type": "application/json" },
          body: JSON.stringify(minimalDefinition()),
        });
        expect(res.status).toBe(500);
        const body = await res.json();
        expect(body).toEqual({
          code: "BODY_ALREADY_READ",
          error:
            `A middleware of the host app read the body of POST ${CONTRACT_PATH} before the registry could: mount ` +
            "the registry before body parsers (express.json(), express.urlencoded(), ...), or give those only the " +
            "host's own routes.",
        });
        // An RPC too, answered before its protocol is known: the same body.
        const connect = await fetch(`${baseUrl}/${AgentDefinitionService.typeName}/ListAgentDefinitions`, {
          method: "POST",
          headers: { authorization: host().authorization, "content-type": "application/json" },
          body: "{}",
        });
        expect(connect.status).toBe(500);
        expect(await connect.json()).toMatchObject({ code: "BODY_ALREADY_READ" });
        expect(host().logger.lines.some((l) => /before body parsers/.test(l.err?.message ?? ""))).toBe(true);
      } finally {
        await stop(server);
      }
    });

    it(
      "drains on close: " + "the registry's paths answer 503 in the spec's shape, the host's routes still answer",
      async () => {
        const registry = await createRegistryMiddlewareOf(host().registry);
        const { server, baseUrl } = await serve((h) => {
          h.use(registry);
          h.get("/hello", (_req, res) => void res.send("still here"));
        });
        try {
          expect(
            (await fetch(`${baseUrl}${TENANT_PATH}?limit=1`, { headers: { authorization: host().authorization } }))
              .status,
          ).toBe(200);
          await registry.close();
          const refused = await fetch(`${baseUrl}${TENANT_PATH}?limit=1`, {
            headers: { authorization: host().authorization },
          });
          expect(refused.status).toBe(503);
          expect(await refused.json()).toMatchObject({ code: "UNAVAILABLE" });
          expect(await (await fetch(`${baseUrl}/hello`)).text()).toBe("still here");
          // The App was passed in: closing this middleware left it open for the first one.
          expect((await rest(`${TENANT_PATH}?limit=1`)).status).toBe(200);
        } finally {
          await stop(server);
        }
      },
    );
  });
});

/** A middleware of the App `registry` serves (closing it leaves the App open). */
function createRegistryMiddlewareOf(registry: RegistryMiddleware): Promise<RegistryMiddleware> {
  return createRegistryMiddleware(registry.app);
}

describe("the package's ./express export", () => {
  it("points at the build of src/main/express.ts, with its types", () => {
    const target = packageJson.exports["./express"];
    expect(target).toEqual({ types: "./dist/src/main/express.d.ts", default: "./dist/src/main/express.js" });
    expect(
      existsSync(
        new URL(`../../${target.default.replace(/^\.\/dist\//, "").replace(/\.js$/, ".ts")}`, import.meta.url),
      ),
    ).toBe(true);
  });
});
