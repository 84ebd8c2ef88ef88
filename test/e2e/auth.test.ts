import { create, fromJson } from "@bufbuild/protobuf";
import { Code, type ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { status as grpcStatus, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  ListAgentDefinitionsRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { ListTenantsRequestSchema, TenantAdminService } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { openLocalIssuer } from "../../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import { now, sign, tamper } from "../auth/forge.js";
import { withAuthorization } from "../support/auth.js";
import { type FreshDatabase, forEachDatabase, testDatabases } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { createGrpcJsClient, grpcErrorDetails } from "../support/grpc-js-client.js";
import {
  AUDIENCE,
  OPAQUE_RESOURCE,
  startOidcProvider,
  type TestClient,
  type TestIssuer,
} from "../support/oidc-provider.js";
import { startServer, type TestServer, useServer } from "../support/server.js";

const DEFINITIONS = "/api/asor/v1/default/agentDefinition";

describe("with an OpenID provider on loopback", () => {
  const writer: TestClient = {
    clientId: "writer",
    clientSecret: "writer-secret-0123456789",
    tenant: "default",
    domains: ["Development", "Setup: Agents"],
  };
  /** A platform operator: the admin domain and agent domains, no tenant claim, the platform admin claim. */
  const operator: TestClient = {
    clientId: "operator",
    clientSecret: "operator-secret-0123456789",
    domains: ["Setup: Tenants", "Setup: Agents"],
    platformAdmin: true,
  };
  /** No tenant claim, and no platform admin claim: not a platform operator. */
  const untenanted: TestClient = {
    clientId: "untenanted",
    clientSecret: "untenanted-secret-0123456789",
    domains: ["Setup: Tenants", "Setup: Agents"],
  };
  /** Tenant acme's own administrator: the admin domain, scoped to acme. */
  const acmeAdmin: TestClient = {
    clientId: "acme-admin",
    clientSecret: "acme-admin-secret-0123456789",
    tenant: "acme",
    domains: ["Setup: Tenants"],
  };
  /** Scoped to acme, with the explicit platform admin claim. */
  const acmePlatform: TestClient = {
    clientId: "acme-platform",
    clientSecret: "acme-platform-secret-0123456789",
    tenant: "acme",
    domains: ["Setup: Tenants"],
    platformAdmin: true,
  };
  let issuer: TestIssuer;
  let database: FreshDatabase;
  let server: TestServer & { stop(): Promise<void> };
  const issuerEnv = () => ({
    AUTH_ISSUER: issuer.issuer,
    AUTH_ALLOW_HTTP_ISSUER: "true",
    AUTH_AUDIENCE: AUDIENCE,
    AUTH_INTROSPECTION_CLIENT_ID: issuer.introspector.clientId,
    AUTH_INTROSPECTION_CLIENT_SECRET: issuer.introspector.clientSecret,
    // Revocation takes effect after the introspection cache time; with no cache, at once.
    AUTH_INTROSPECTION_CACHE_SECONDS: "0",
  });

  beforeAll(async () => {
    issuer = await startOidcProvider([writer, operator, untenanted, acmeAdmin, acmePlatform]);
    database = await testDatabases()[0]!.create();
    server = await startServer(database, issuerEnv());
  });
  afterAll(async () => {
    await server?.stop();
    await database?.cleanup();
    await issuer?.close();
  });

  const rest = (authorization: string | undefined, init: RequestInit = {}, path = DEFINITIONS) =>
    fetch(`${server.baseUrl}${path}`, {
      ...init,
      headers: { ...(authorization ? { authorization } : {}), ...(init.headers as Record<string, string>) },
    });

  it("accepts its client_credentials JWT access tokens over REST, Connect and gRPC", async () => {
    const bearer = `Bearer ${await issuer.token(writer)}`;
    const posted = await rest(bearer, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(minimalDefinition({ name: "OIDC agent" })),
    });
    expect(posted.status).toBe(201);
    const { id } = await posted.json();

    const connect = createClient(
      AgentDefinitionService,
      createConnectTransport({
        baseUrl: server.baseUrl,
        httpVersion: "1.1",
        interceptors: [withAuthorization(bearer)],
      }),
    );
    expect((await connect.getAgentDefinition({ id })).name).toBe("OIDC agent");

    const grpc = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server.port}`, bearer);
    try {
      const request = create(UpsertAgentDefinitionRequestSchema, {
        agentCardAndTools: fromJson(
          AgentDefinitionSchema,
          minimalDefinition({ name: "OIDC agent", version: "2" }) as never,
        ),
      });
      const v2 = await grpc.call("upsertAgentDefinition", request, AgentDefinitionSchema);
      expect(v2.referenceId).toMatch(/^Agent_ID=AGENT-\d+$/);
    } finally {
      grpc.close();
    }
  });

  it(
    "accepts an opaque token through introspection, and refuses it once revoked (no introspection " + "cache)",
    async () => {
      const opaque = await issuer.token(writer, { resource: OPAQUE_RESOURCE });
      expect(opaque.split(".")).toHaveLength(1);
      expect((await rest(`Bearer ${opaque}`)).status).toBe(200);
      await issuer.revoke(writer, opaque);
      const refused = await rest(`Bearer ${opaque}`);
      expect(refused.status).toBe(401);
      expect((await refused.json()).errors[0].error).toMatch(/not active/);
    },
  );

  it("answers 401 with a Bearer challenge and the validation error body, never echoing the token", async () => {
    const good = await issuer.token(writer);
    const expired = await sign(issuer.signingKey, issuer.kid, {
      iss: issuer.issuer,
      aud: AUDIENCE,
      sub: "x",
      iat: now() - 7200,
      exp: now() - 3600,
    });
    const cases: [string, string | undefined, RegExp][] = [
      ["no token", undefined, /No bearer token/],
      ["a malformed header", `Basic ${btoa("a:b")}`, /not of the form/],
      ["an expired token", `Bearer ${expired}`, /expired/],
      ["a tampered token", `Bearer ${tamper(good, (c) => (c.tenant = "other"))}`, /signature/i],
    ];
    for (const [what, authorization, message] of cases) {
      const res = await rest(authorization);
      expect(res.status, what).toBe(401);
      expect(res.headers.get("www-authenticate"), what).toBe('Bearer realm="asor"');
      const text = await res.text();
      const body = JSON.parse(text);
      expect(body.errors[0], what).toMatchObject({ code: "UNAUTHENTICATED" });
      expect(body.errors[0].error, what).toMatch(message);
      if (authorization) expect(text, what).not.toContain(authorization.slice(7, 40));
    }
  });

  it(
    "refuses a token without the tenant claim (403, naming the claim) on every agent operation, by default with " +
      "an issuer",
    async () => {
      const bearer = `Bearer ${await issuer.token(operator)}`;
      for (const path of [DEFINITIONS, "/asor/v1/agentDefinition"]) {
        const res = await rest(bearer, {}, path);
        expect(res.status, path).toBe(403);
        expect((await res.json()).errors[0].error, path).toMatch(/no "tenant" claim/);
      }
      const connect = createClient(
        AgentDefinitionService,
        createConnectTransport({
          baseUrl: server.baseUrl,
          httpVersion: "1.1",
          interceptors: [withAuthorization(bearer)],
        }),
      );
      const err = (await connect.listAgentDefinitions({}).catch((e: unknown) => e)) as ConnectError;
      expect(err.code).toBe(Code.PermissionDenied);
      expect(err.rawMessage).toMatch(/no "tenant" claim/);
    },
  );

  it(
    "lets a token without the tenant claim act on the default tenant where " + "AUTH_NO_TENANT_CLAIM_USES_DEFAULT=true",
    async () => {
      const other = await testDatabases()[0]!.create();
      const lenient = await startServer(other, { ...issuerEnv(), AUTH_NO_TENANT_CLAIM_USES_DEFAULT: "true" });
      try {
        const bearer = `Bearer ${await issuer.token(operator)}`;
        expect((await fetch(`${lenient.baseUrl}${DEFINITIONS}`, { headers: { authorization: bearer } })).status).toBe(
          200,
        );
        expect(
          (await fetch(`${lenient.baseUrl}/api/asor/v1/beta/agentDefinition`, { headers: { authorization: bearer } }))
            .status,
        ).toBe(403);
      } finally {
        await lenient.stop();
        await other.cleanup();
      }
    },
  );

  it(
    "refuses the tenant admin RPCs to a tenant's own admin token, and admits a platform operator's on every " +
      "surface",
    async () => {
      const admin = (bearer: string) =>
        createClient(
          TenantAdminService,
          createConnectTransport({
            baseUrl: server.baseUrl,
            httpVersion: "1.1",
            interceptors: [withAuthorization(bearer)],
          }),
        );
      const scoped = `Bearer ${await issuer.token(acmeAdmin)}`;
      const listed = await rest(scoped, {}, "/asor/v1/admin/tenants");
      expect(listed.status).toBe(403);
      expect((await listed.json()).errors[0].error).toMatch(/acts on every tenant.*not one for tenant "acme"/);
      const created = await rest(
        scoped,
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ name: "evil", sequencePrefix: "E-" }),
        },
        "/asor/v1/admin/tenants",
      );
      expect(created.status).toBe(403);
      expect(
        (
          (await admin(scoped)
            .listTenants({})
            .catch((e: unknown) => e)) as ConnectError
        ).code,
      ).toBe(Code.PermissionDenied);
      expect(
        (
          (await admin(scoped)
            .createTenant({ name: "evil2" })
            .catch((e: unknown) => e)) as ConnectError
        ).code,
      ).toBe(Code.PermissionDenied);
      const grpc = createGrpcJsClient(TenantAdminService, `127.0.0.1:${server.port}`, scoped);
      try {
        const err = (await grpc
          .call("listTenants", create(ListTenantsRequestSchema, {}))
          .catch((e: unknown) => e)) as ServiceError;
        expect(err.code).toBe(grpcStatus.PERMISSION_DENIED);
      } finally {
        grpc.close();
      }

      // A token that only lacks a tenant claim is no platform operator's.
      const bare = `Bearer ${await issuer.token(untenanted)}`;
      const refused = (await admin(bare)
        .listTenants({})
        .catch((e: unknown) => e)) as ConnectError;
      expect(refused.code).toBe(Code.PermissionDenied);
      expect(refused.rawMessage).toMatch(/"platform_admin": true/);
      expect((await rest(bare, {}, "/asor/v1/admin/tenants")).status).toBe(403);
      const platform = `Bearer ${await issuer.token(operator)}`;
      expect((await admin(platform).createTenant({ name: "made-by-operator", sequencePrefix: "OP-" })).name).toBe(
        "made-by-operator",
      );
      const flagged = `Bearer ${await issuer.token(acmePlatform)}`;
      const names = (await admin(flagged).listTenants({})).tenants.map((t) => t.name);
      expect(names).toContain("made-by-operator");
      expect(names).not.toContain("evil");
      expect(names).not.toContain("evil2");
    },
  );

  it("answers UNAUTHENTICATED over gRPC and Connect with the same detail", async () => {
    const grpc = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server.port}`);
    try {
      const err = (await grpc
        .call("listAgentDefinitions", create(ListAgentDefinitionsRequestSchema, {}))
        .catch((e: unknown) => e)) as ServiceError;
      expect(err.code).toBe(grpcStatus.UNAUTHENTICATED);
      expect(grpcErrorDetails(err)).toHaveLength(1);
    } finally {
      grpc.close();
    }
    const connect = createClient(
      AgentDefinitionService,
      createConnectTransport({ baseUrl: server.baseUrl, httpVersion: "1.1" }),
    );
    const err = (await connect.listAgentDefinitions({}).catch((e: unknown) => e)) as ConnectError;
    expect(err.code).toBe(Code.Unauthenticated);
    expect(err.findDetails(ValidationErrorSchema)[0]?.errors[0]?.code).toBe("UNAUTHENTICATED");
  });
});

forEachDatabase((db) => {
  const server = useServer(db);
  const rest = async (path: string, authorization: string, init: RequestInit = {}) =>
    fetch(`${server().baseUrl}${path}`, {
      ...init,
      headers: { authorization, "content-type": "application/json", ...(init.headers as Record<string, string>) },
    });
  const connect = async (authorization: string) =>
    createClient(
      AgentDefinitionService,
      createConnectTransport({
        baseUrl: server().baseUrl,
        httpVersion: "1.1",
        interceptors: [withAuthorization(authorization)],
      }),
    );
  const denied = async (call: Promise<unknown>) => ((await call.catch((e: unknown) => e)) as ConnectError).code;

  beforeAll(async () => {
    const admin = createClient(
      TenantAdminService,
      createConnectTransport({
        baseUrl: server().baseUrl,
        httpVersion: "1.1",
        interceptors: [withAuthorization(server().authorization)],
      }),
    );
    await admin.createTenant({ name: "beta", sequencePrefix: "B-" });
  });

  describe("security domains", () => {
    it("refuses each operation without its domain (403 on REST, PERMISSION_DENIED on RPC)", async () => {
      const development = await server().bearer({ domains: ["Development"] });
      const setup = await server().bearer({ domains: ["Setup: Agents"] });
      const none = await server().bearer({ domains: [] });
      const posted = await (
        await rest(DEFINITIONS, development, {
          method: "POST",
          body: JSON.stringify(minimalDefinition({ name: "Dev agent" })),
        })
      ).json();
      expect(posted.id).toMatch(/^[0-9a-f]{32}$/);
      // Get and versions need Setup: Agents; Development alone is not enough.
      const get = await rest(`${DEFINITIONS}/${posted.id}`, development);
      expect(get.status).toBe(403);
      expect(get.headers.get("www-authenticate")).toContain('error="insufficient_scope"');
      expect((await get.json()).errors[0].code).toBe("PERMISSION_DENIED");
      expect((await rest(`${DEFINITIONS}/${posted.id}/versions`, development)).status).toBe(403);
      expect((await rest(`${DEFINITIONS}/${posted.id}`, setup)).status).toBe(200);
      // List and upsert need either domain.
      expect((await rest(DEFINITIONS, none)).status).toBe(403);
      expect(
        (await rest(DEFINITIONS, none, { method: "POST", body: JSON.stringify(minimalDefinition()) })).status,
      ).toBe(403);
      expect((await rest(DEFINITIONS, setup)).status).toBe(200);
      // The same over Connect.
      expect(await denied((await connect(development)).getAgentDefinition({ id: posted.id }))).toBe(
        Code.PermissionDenied,
      );
      expect(await denied((await connect(none)).listAgentDefinitions({}))).toBe(Code.PermissionDenied);
      // Tenant admin needs its own domain, which the spec's two do not give.
      const admin = createClient(
        TenantAdminService,
        createConnectTransport({
          baseUrl: server().baseUrl,
          httpVersion: "1.1",
          interceptors: [withAuthorization(await server().bearer({ domains: ["Development", "Setup: Agents"] }))],
        }),
      );
      expect(await denied(admin.listTenants({}))).toBe(Code.PermissionDenied);
      expect(await denied(admin.createTenant({ name: "sneaky", sequencePrefix: "S-" }))).toBe(Code.PermissionDenied);
    });
  });

  describe("before reading a body", () => {
    it("answers 401 or 403 to a POST, not a verdict on its body, and reads no oversized body", async () => {
      const noToken = await fetch(`${server().baseUrl}${DEFINITIONS}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{not json",
      });
      expect(noToken.status).toBe(401);
      const huge = await fetch(`${server().baseUrl}${DEFINITIONS}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "x".repeat(2 * 1024 * 1024),
      });
      expect(huge.status).toBe(401);
      const noDomain = await rest(DEFINITIONS, await server().bearer({ domains: [] }), {
        method: "POST",
        body: "{not json",
      });
      expect(noDomain.status).toBe(403);
    });
  });

  describe("tenant isolation", () => {
    it("refuses a token for one tenant on another tenant's paths and RPCs", async () => {
      const defaultToken = server().authorization;
      expect((await rest("/api/asor/v1/beta/agentDefinition", defaultToken)).status).toBe(403);
      expect(
        (
          await rest("/api/asor/v1/beta/agentDefinition", defaultToken, {
            method: "POST",
            body: JSON.stringify(minimalDefinition()),
          })
        ).status,
      ).toBe(403);
      expect(await denied((await connect(defaultToken)).listAgentDefinitions({ tenant: "beta" }))).toBe(
        Code.PermissionDenied,
      );
      const grpc = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, defaultToken);
      try {
        const err = (await grpc
          .call("listAgentDefinitions", create(ListAgentDefinitionsRequestSchema, { tenant: "beta" }))
          .catch((e: unknown) => e)) as ServiceError;
        expect(err.code).toBe(grpcStatus.PERMISSION_DENIED);
      } finally {
        grpc.close();
      }
    });

    it("never shows tenant B's data in tenant A's list; the contract paths act on the token's tenant", async () => {
      const beta = await server().bearer({ tenant: "beta" });
      const created = await (
        await rest("/asor/v1/agentDefinition", beta, {
          method: "POST",
          body: JSON.stringify(minimalDefinition({ name: "Beta only" })),
        })
      ).json();
      expect(created.reference_id).toMatch(/^Agent_ID=B-\d+$/);
      const betaList = await (await rest("/asor/v1/agentDefinition?limit=100", beta)).json();
      expect(betaList.data.map((d: { name: string }) => d.name)).toEqual(["Beta only"]);
      const defaultList = await (await rest("/asor/v1/agentDefinition?limit=100", server().authorization)).json();
      expect(defaultList.data.map((d: { name: string }) => d.name)).not.toContain("Beta only");
      expect((await rest(`/asor/v1/agentDefinition/${created.id}`, server().authorization)).status).toBe(404);
    });

    it("refuses the tenant admin RPCs to a token scoped to a tenant, even holding the admin domain", async () => {
      const admin = async (authorization: string) =>
        createClient(
          TenantAdminService,
          createConnectTransport({
            baseUrl: server().baseUrl,
            httpVersion: "1.1",
            interceptors: [withAuthorization(authorization)],
          }),
        );
      const betaAdmin = await server().bearer({ tenant: "beta", domains: ["Setup: Tenants"] });
      expect(await denied((await admin(betaAdmin)).listTenants({}))).toBe(Code.PermissionDenied);
      expect(await denied((await admin(betaAdmin)).createTenant({ name: "beta-made", sequencePrefix: "BM-" }))).toBe(
        Code.PermissionDenied,
      );
      expect((await rest("/asor/v1/admin/tenants", betaAdmin)).status).toBe(403);
      // A platform operator's token is one with the platform admin claim; no tenant claim alone is not enough.
      const untenanted = await server().bearer({ tenant: null, domains: ["Setup: Tenants"] });
      expect(await denied((await admin(untenanted)).listTenants({}))).toBe(Code.PermissionDenied);
      const operator = await server().bearer({ tenant: null, domains: ["Setup: Tenants"], platformAdmin: true });
      expect((await (await admin(operator)).listTenants({})).tenants.map((t) => t.name)).not.toContain("beta-made");
      const flagged = await server().bearer({ tenant: "beta", domains: ["Setup: Tenants"], platformAdmin: true });
      expect((await rest("/asor/v1/admin/tenants", flagged)).status).toBe(200);
    });

    it(
      'refuses (401) a tenant claim of "" or null on every operation, the tenant admin RPCs too: neither is \'no ' +
        "tenant', nor a platform operator",
      async () => {
        const issuer = await openLocalIssuer(localIssuerKeyFile(server().app.config.dataDir), server().app.config.auth);
        for (const tenant of ["", null]) {
          // The issuer's request type says string; null is what a broken identity provider sends.
          const domains = ["Development", "Setup: Agents", "Setup: Tenants"];
          const token = `Bearer ${await issuer.issue({ tenant: tenant as string, domains })}`;
          const res = await rest(DEFINITIONS, token);
          expect(res.status, String(tenant)).toBe(401);
          expect((await res.json()).errors[0]).toMatchObject({
            code: "UNAUTHENTICATED",
            error: expect.stringMatching(/"tenant" claim is not a tenant name/),
          });
          expect((await rest("/asor/v1/admin/tenants", token)).status).toBe(401);
          const admin = createClient(
            TenantAdminService,
            createConnectTransport({
              baseUrl: server().baseUrl,
              httpVersion: "1.1",
              interceptors: [withAuthorization(token)],
            }),
          );
          expect(await denied(admin.listTenants({}))).toBe(Code.Unauthenticated);
          expect(await denied((await connect(token)).listAgentDefinitions({}))).toBe(Code.Unauthenticated);
        }
      },
    );

    it("limits a token without a tenant claim to the default tenant", async () => {
      const untenanted = await server().bearer({ tenant: null, domains: ["Setup: Agents"] });
      expect((await rest(DEFINITIONS, untenanted)).status).toBe(200);
      expect((await rest("/api/asor/v1/beta/agentDefinition", untenanted)).status).toBe(403);
    });
  });
});
