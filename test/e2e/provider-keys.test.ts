/**
 * Provider keys and tenant settings (issue 43, item 2) through a real server: REST with fetch, Connect with
 * its client, gRPC with grpc-js; on SQLite and MariaDB.
 */
import { generateKeyPairSync } from "node:crypto";
import { create, toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { status as grpcStatus, type ServiceError } from "@grpc/grpc-js";
import { beforeAll, describe, expect, it } from "vitest";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import {
  JsonWebKeySchema,
  SetProviderKeysRequestSchema,
  TenantAdminService,
  TenantSettings_Signatures,
} from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { withAuthorization } from "../support/auth.js";
import { forEachDatabase } from "../support/databases.js";
import { createGrpcJsClient, grpcErrorDetails } from "../support/grpc-js-client.js";
import { useServer } from "../support/server.js";

const ADMIN = "/asor/v1/admin/tenants";
/** The admin domain (AUTH_ADMIN_DOMAIN's default). */
const SETUP_TENANTS = "Setup: Tenants";

/** A fresh public JWK with `kid`; `alg` follows the key type. */
function publicJwk(kid: string, type: "ed25519" | "ec" = "ed25519"): Record<string, string> {
  const { publicKey } =
    type === "ec" ? generateKeyPairSync("ec", { namedCurve: "P-256" }) : generateKeyPairSync("ed25519");
  const jwk = publicKey.export({ format: "jwk" }) as Record<string, string>;
  return { ...jwk, kid, alg: type === "ec" ? "ES256" : "EdDSA" };
}

const keysPath = (tenant: string, provider: string) =>
  `${ADMIN}/${tenant}/providers/${encodeURIComponent(provider)}/keys`;

forEachDatabase((db) => {
  const server = useServer(db);
  /** A token of `tenant` with the admin domain only: the tenant's own admin, no platform operator. */
  const tenantAdmin = (tenant: string, domains = [SETUP_TENANTS]) => server().bearer({ tenant, domains });
  const call = async (method: string, path: string, authorization: string, body?: unknown) => {
    const res = await fetch(`${server().baseUrl}${path}`, {
      method,
      headers: { authorization, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: await res.json() };
  };
  const asOperator = (method: string, path: string, body?: unknown) => call(method, path, server().authorization, body);
  const connect = (authorization: string) =>
    createClient(
      TenantAdminService,
      createConnectTransport({
        baseUrl: server().baseUrl,
        httpVersion: "1.1",
        interceptors: [withAuthorization(authorization)],
      }),
    );
  /** The code and path of each issue of a REST refusal. */
  const issues = (body: { errors: { code: string; path?: string }[] }) =>
    body.errors.map((e) => `${e.code} ${e.path ?? ""}`);

  beforeAll(async () => {
    for (const name of ["alpha", "beta"]) expect((await asOperator("POST", ADMIN, { name })).status).toBe(201);
  });

  describe("a provider's keys over REST", () => {
    it("sets, lists and revokes; a revoked key stays in the record, out of the JWKS", async () => {
      const path = keysPath("alpha", "Provider=acme");
      const [one, two] = [publicJwk("one"), publicJwk("two", "ec")];
      const set = await asOperator("PUT", path, { keys: [one, two] });
      expect(set.status).toBe(200);
      expect(set.body).toMatchObject({ tenant: "alpha", providerId: "Provider=acme" });
      expect(set.body.keys).toEqual([
        { kty: "OKP", kid: "one", alg: "EdDSA", use: "sig", crv: "Ed25519", x: one?.x },
        { kty: "EC", kid: "two", alg: "ES256", use: "sig", crv: "P-256", x: two?.x, y: two?.y },
      ]);
      expect(set.body.records.map((r: { kid: string; revokeTime?: string }) => [r.kid, r.revokeTime])).toEqual([
        ["one", undefined],
        ["two", undefined],
      ]);
      const revoked = await asOperator("DELETE", `${path}/one`);
      expect(revoked.status).toBe(200);
      expect(revoked.body.keys.map((k: { kid: string }) => k.kid)).toEqual(["two"]);
      const listed = await asOperator("GET", path);
      expect(listed.body).toEqual(revoked.body);
      expect(listed.body.records[0]).toMatchObject({ kid: "one", alg: "EdDSA", revokeTime: expect.any(String) });
      expect((await asOperator("DELETE", `${path}/nine`)).status).toBe(404);
    });

    it("replaces the set: keys left out are revoked, a revoked kid cannot come back", async () => {
      const path = keysPath("alpha", "Provider=replaced");
      const [a, b, c] = [publicJwk("a"), publicJwk("b"), publicJwk("c")];
      await asOperator("PUT", path, { keys: [a, b] });
      const replaced = await asOperator("PUT", path, { keys: [b, c] });
      expect(replaced.body.keys.map((k: { kid: string }) => k.kid)).toEqual(["b", "c"]);
      expect(replaced.body.records.find((r: { kid: string }) => r.kid === "a").revokeTime).toEqual(expect.any(String));
      const back = await asOperator("PUT", path, { keys: [c, a] });
      expect(back.status).toBe(400);
      expect(issues(back.body)).toEqual(["KID_REVOKED keys[1].kid"]);
      const other = await asOperator("PUT", path, { keys: [{ ...publicJwk("c"), kid: "c" }] });
      expect(issues(other.body)).toEqual(["KID_TAKEN keys[0].kid"]);
      expect((await asOperator("GET", path)).body).toEqual(replaced.body);
    });

    it("refuses private keys, symmetric keys, none, HMAC, certificates and a kid twice, naming each path", async () => {
      const path = keysPath("alpha", "Provider=refused");
      const ok = publicJwk("ok");
      const privateKey = generateKeyPairSync("ed25519").privateKey.export({ format: "jwk" }) as Record<string, string>;
      const refusal = await asOperator("PUT", path, {
        keys: [
          ok,
          { ...privateKey, kid: "priv", alg: "EdDSA" },
          { ...publicJwk("cert"), x5c: ["MIIB"], x5u: "http://127.0.0.1:1/k" },
        ],
      });
      expect(refusal.status).toBe(400);
      expect(issues(refusal.body)).toEqual([
        "UNKNOWN_FIELD keys[1].d",
        "UNKNOWN_FIELD keys[2].x5c",
        "UNKNOWN_FIELD keys[2].x5u",
      ]);
      expect(refusal.body.errors[0].error).toBe(
        "keys[1].d is refused: a private key member: the registry holds public keys only (take a private key sent " +
          "anywhere as exposed).",
      );
      expect(refusal.body.errors[1].error).toMatch(/^keys\[2\]\.x5c is refused: a certificate member/);
      const algs = await asOperator("PUT", path, {
        keys: [
          { kty: "oct", kid: "sym", alg: "HS256", k: undefined },
          { ...publicJwk("none"), alg: "none" },
          { ...publicJwk("hs"), alg: "HS256" },
          publicJwk("ok"),
          publicJwk("ok"),
        ],
      });
      expect(issues(algs.body)).toEqual([
        "NOT_ALLOWED keys[0].kty",
        "NOT_ALLOWED keys[1].alg",
        "NOT_ALLOWED keys[2].alg",
        "DUPLICATE_KID keys[4].kid",
      ]);
      const many = await asOperator("PUT", path, { keys: Array.from({ length: 21 }, (_, i) => publicJwk(`k${i}`)) });
      expect(issues(many.body)).toEqual(["TOO_MANY keys"]);
      expect((await asOperator("GET", path)).body.records).toEqual([]);
    });
  });

  it("takes the provider id unencoded or percent-encoded, and a kid with a slash or a space encoded", async () => {
    const kid = "2026/01 key";
    const set = await asOperator("PUT", `${ADMIN}/alpha/providers/Provider=raw/keys`, { keys: [publicJwk(kid)] });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body.providerId).toBe("Provider=raw");
    const encoded = keysPath("alpha", "Provider=raw");
    expect((await asOperator("GET", encoded)).body.keys.map((k: { kid: string }) => k.kid)).toEqual([kid]);
    const revoked = await asOperator("DELETE", `${encoded}/${encodeURIComponent(kid)}`);
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    expect(revoked.body.keys).toEqual([]);
  });

  describe("tenant isolation", () => {
    it("lets a tenant's admin act on its own tenant's keys and settings, and on no other's", async () => {
      const alpha = await tenantAdmin("alpha");
      const path = keysPath("alpha", "Provider=own");
      expect((await call("PUT", path, alpha, { keys: [publicJwk("mine")] })).status).toBe(200);
      expect((await call("GET", path, alpha)).body.keys.map((k: { kid: string }) => k.kid)).toEqual(["mine"]);
      expect((await call("PATCH", `${ADMIN}/alpha`, alpha, { signatures: "REQUIRED" })).status).toBe(200);
      const beta = keysPath("beta", "Provider=own");
      for (const [method, target, body] of [
        ["PUT", beta, { keys: [publicJwk("theirs")] }],
        ["GET", beta, undefined],
        ["DELETE", `${beta}/mine`, undefined],
        ["GET", `${ADMIN}/beta`, undefined],
        ["PATCH", `${ADMIN}/beta`, { signatures: "OPTIONAL" }],
      ] as const) {
        const res = await call(method, target, alpha, body);
        expect(res.status, `${method} ${target}`).toBe(403);
        expect(res.body.errors).toEqual([
          expect.objectContaining({ code: "PERMISSION_DENIED", error: expect.stringContaining('"alpha", not "beta"') }),
        ]);
      }
      expect((await asOperator("GET", beta)).body.records).toEqual([]);
      expect((await asOperator("GET", `${ADMIN}/beta`)).body.settings).toEqual({
        signatures: "OPTIONAL",
        discovery: "TOKEN",
      });
    });

    it("keeps the same provider's keys apart per tenant", async () => {
      const [a, b] = [publicJwk("shared"), publicJwk("shared")];
      await asOperator("PUT", keysPath("alpha", "Provider=twice"), { keys: [a] });
      await asOperator("PUT", keysPath("beta", "Provider=twice"), { keys: [b] });
      expect((await asOperator("GET", keysPath("alpha", "Provider=twice"))).body.keys[0].x).toBe(a?.x);
      expect((await asOperator("GET", keysPath("beta", "Provider=twice"))).body.keys[0].x).toBe(b?.x);
      await asOperator("DELETE", `${keysPath("beta", "Provider=twice")}/shared`);
      expect((await asOperator("GET", keysPath("alpha", "Provider=twice"))).body.keys).toHaveLength(1);
    });

    it("refuses a tenant's token without the admin domain, and keeps tenant setup to platform operators", async () => {
      const agentsOnly = await tenantAdmin("alpha", ["Setup: Agents", "Development"]);
      expect((await call("GET", keysPath("alpha", "Provider=own"), agentsOnly)).status).toBe(403);
      const alpha = await tenantAdmin("alpha");
      expect((await call("POST", ADMIN, alpha, { name: "gamma" })).status).toBe(403);
      expect((await call("GET", ADMIN, alpha)).status).toBe(403);
      const err = await connect(alpha)
        .getProviderKeys({ tenant: "beta", providerId: "Provider=own" })
        .catch((e: unknown) => e);
      expect(ConnectError.from(err).code).toBe(Code.PermissionDenied);
    });
  });

  describe("tenant settings", () => {
    it("are read and changed over REST and Connect; unknown members and values refused with their path", async () => {
      expect((await asOperator("GET", `${ADMIN}/beta`)).body).toMatchObject({
        name: "beta",
        settings: { signatures: "OPTIONAL", discovery: "TOKEN" },
      });
      const patched = await asOperator("PATCH", `${ADMIN}/beta`, { signatures: "REQUIRED_FOR_KEYED_PROVIDERS" });
      expect(patched.body.settings).toEqual({ signatures: "REQUIRED_FOR_KEYED_PROVIDERS", discovery: "TOKEN" });
      const unknown = await asOperator("PATCH", `${ADMIN}/beta`, { signatures: "REQUIRED", signatur: "x" });
      expect(issues(unknown.body)).toEqual(["UNKNOWN_FIELD signatur"]);
      const unset = await asOperator("PATCH", `${ADMIN}/beta`, { signatures: "SIGNATURES_UNSPECIFIED" });
      expect(issues(unset.body)).toEqual(["NOT_ALLOWED signatures"]);
      expect((await asOperator("PATCH", `${ADMIN}/beta`, {})).body.settings).toEqual({
        signatures: "REQUIRED_FOR_KEYED_PROVIDERS",
        discovery: "TOKEN",
      });
      const noDiscovery = await asOperator("PATCH", `${ADMIN}/beta`, { discovery: "DISCOVERY_UNSPECIFIED" });
      expect(issues(noDiscovery.body)).toEqual(["NOT_ALLOWED discovery"]);
      const client = connect(server().authorization);
      const updated = await client.updateTenant({
        name: "beta",
        settings: { signatures: TenantSettings_Signatures.REQUIRED },
      });
      expect(updated.settings?.signatures).toBe(TenantSettings_Signatures.REQUIRED);
      expect((await client.getTenant({ name: "beta" })).settings?.signatures).toBe(TenantSettings_Signatures.REQUIRED);
      const listed = await client.listTenants({});
      expect(listed.tenants.find((t) => t.name === "beta")?.settings?.signatures).toBe(
        TenantSettings_Signatures.REQUIRED,
      );
    });
  });

  describe("over gRPC", () => {
    it("sets keys from a binary message and refuses HS256 with its path in the error details", async () => {
      const client = createGrpcJsClient(TenantAdminService, `127.0.0.1:${server().port}`, server().authorization);
      try {
        const key = create(JsonWebKeySchema, publicJwk("grpc"));
        const request = (keys: (typeof key)[]) =>
          create(SetProviderKeysRequestSchema, { tenant: "beta", providerId: "Provider=grpc", jwks: { keys } });
        const answer = (await client.call("setProviderKeys", request([key]))) as unknown as { keys: { kid: string }[] };
        expect(answer.keys.map((k) => k.kid)).toEqual(["grpc"]);
        const refused = await client
          .call("setProviderKeys", request([create(JsonWebKeySchema, { ...key, alg: "HS256" })]))
          .catch((e: unknown) => e as ServiceError);
        expect((refused as ServiceError).code).toBe(grpcStatus.INVALID_ARGUMENT);
        const [detail] = grpcErrorDetails(refused as ServiceError);
        const errors = (toJson(ValidationErrorSchema, detail as never) as { errors: { code: string; path: string }[] })
          .errors;
        expect(errors.map((e) => `${e.code} ${e.path}`)).toEqual(["NOT_ALLOWED keys[0].alg"]);
      } finally {
        client.close();
      }
    });
  });
});
