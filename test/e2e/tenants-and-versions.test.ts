import { create, fromJson, toJson } from "@bufbuild/protobuf";
import { Code, type ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { status as grpcStatus, type ServiceError } from "@grpc/grpc-js";
import { beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { ValidationErrorSchema } from "../../gen/asor/v1/error_pb.js";
import { TenantAdminService } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { withAuthorization } from "../support/auth.js";
import { forEachDatabase } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";
import { createGrpcJsClient, grpcErrorDetails } from "../support/grpc-js-client.js";
import { useServer } from "../support/server.js";

forEachDatabase((db) => {
  const server = useServer(db);
  const admin = () =>
    createClient(
      TenantAdminService,
      createConnectTransport({
        baseUrl: server().baseUrl,
        httpVersion: "1.1",
        interceptors: [withAuthorization(server().authorization)],
      }),
    );
  const rest = (tenant: string) => `${server().baseUrl}/api/asor/v1/${tenant}/agentDefinition`;
  /** A token for `tenant` with every domain. */
  const as = (tenant: string) => server().bearer({ tenant });
  const post = async (tenant: string, def: unknown) => {
    const res = await fetch(rest(tenant), {
      method: "POST",
      headers: { "content-type": "application/json", authorization: await as(tenant) },
      body: JSON.stringify(def),
    });
    return { status: res.status, body: await res.json() };
  };
  const get = async (tenant: string, path: string) =>
    fetch(`${rest(tenant)}${path}`, { headers: { authorization: await as(tenant) } });
  /** The code, field and path of each error of a gRPC call (grpc-js), or "ok". */
  const grpcUpsert = async (tenant: string, def: Record<string, unknown>) => {
    const client = createGrpcJsClient(AgentDefinitionService, `127.0.0.1:${server().port}`, await as(tenant));
    try {
      const request = create(UpsertAgentDefinitionRequestSchema, {
        tenant,
        agentCardAndTools: fromJson(AgentDefinitionSchema, def as never),
      });
      await client.call("upsertAgentDefinition", request);
      return { code: grpcStatus.OK, errors: [] };
    } catch (err) {
      const [detail] = grpcErrorDetails(err as ServiceError);
      return {
        code: (err as ServiceError).code,
        errors: (toJson(ValidationErrorSchema, detail as never) as { errors: unknown[] }).errors,
      };
    } finally {
      client.close();
    }
  };

  beforeAll(async () => {
    await admin().createTenant({ name: "acme", sequencePrefix: "ACME-" });
    await admin().createTenant({ name: "noseq" });
  });

  describe("tenant setup over the admin RPC", () => {
    it("lists the tenants with their sequence generators", async () => {
      const { tenants } = await admin().listTenants({});
      const byName = Object.fromEntries(tenants.map((t) => [t.name, t]));
      expect(byName.acme).toMatchObject({ sequencePrefix: "ACME-" });
      expect(byName.noseq?.sequencePrefix).toBeUndefined();
      expect(byName.default).toMatchObject({ sequencePrefix: "AGENT-" });
    });

    it("refuses to set up a tenant twice", async () => {
      const err = await admin()
        .createTenant({ name: "acme" })
        .catch((e: unknown) => e);
      expect((err as ConnectError).code).toBe(Code.AlreadyExists);
      expect((err as ConnectError).findDetails(ValidationErrorSchema)[0]?.errors[0]).toMatchObject({
        code: "TENANT_EXISTS",
        field: "name",
      });
    });

    it("takes a whole-body REST request from the body only: a query parameter cannot override it", async () => {
      const res = await fetch(`${server().baseUrl}/asor/v1/admin/tenants?name=sneaky`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: server().authorization },
        body: JSON.stringify({ name: "viaRest", sequencePrefix: "R-" }),
      });
      expect(res.status).toBe(400);
      expect((await res.json()).errors).toEqual([expect.objectContaining({ code: "UNKNOWN_FIELD", field: "name" })]);
      const ok = await fetch(`${server().baseUrl}/asor/v1/admin/tenants`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: server().authorization },
        body: JSON.stringify({ name: "viaRest", sequencePrefix: "R-" }),
      });
      expect(ok.status).toBe(201);
      expect(await ok.json()).toMatchObject({ name: "viaRest", sequencePrefix: "R-", nextAgentNumber: 1 });
    });

    it("refuses a bad tenant name and prefix, naming both", async () => {
      const err = await admin()
        .createTenant({ name: "no spaces", sequencePrefix: "A=B" })
        .catch((e: unknown) => e);
      expect((err as ConnectError).findDetails(ValidationErrorSchema)[0]?.errors.map((e) => e.path)).toEqual([
        "name",
        "sequencePrefix",
      ]);
    });
  });

  describe("agent ids and versions", () => {
    it("numbers new agents from the tenant's sequence and shares the reference id across versions", async () => {
      const v1 = (await post("acme", minimalDefinition({ name: "Seq A" }))).body;
      const other = (await post("acme", minimalDefinition({ name: "Seq B" }))).body;
      const v2 = (await post("acme", minimalDefinition({ name: "Seq A", version: "2.0.0" }))).body;
      expect(v1.reference_id).toMatch(/^Agent_ID=ACME-\d+$/);
      expect(Number(other.reference_id.slice("Agent_ID=ACME-".length))).toBe(
        Number(v1.reference_id.slice("Agent_ID=ACME-".length)) + 1,
      );
      expect(v2.reference_id).toBe(v1.reference_id);
      expect(v2.id).not.toBe(v1.id);
    });

    it("GET by reference id answers the newest version; by 32-hex id, that version", async () => {
      const v1 = (await post("acme", minimalDefinition({ name: "Newest" }))).body;
      const v2 = (await post("acme", minimalDefinition({ name: "Newest", version: "2.0.0" }))).body;
      const newest = await (await get("acme", `/${encodeURIComponent(v1.reference_id)}`)).json();
      expect(newest.id).toBe(v2.id);
      expect((await (await get("acme", `/${v1.id}`)).json()).id).toBe(v1.id);
    });

    it("lists an agent's versions newest first, by either id", async () => {
      const v1 = (await post("acme", minimalDefinition({ name: "Listed" }))).body;
      const v2 = (await post("acme", minimalDefinition({ name: "Listed", version: "2" }))).body;
      const v3 = (await post("acme", minimalDefinition({ name: "Listed", version: "3" }))).body;
      for (const id of [v1.id, v1.reference_id]) {
        const page = await (await get("acme", `/${encodeURIComponent(id)}/versions`)).json();
        expect(page.total).toBe(3);
        expect(page.data.map((d: { id: string }) => d.id)).toEqual([v3.id, v2.id, v1.id]);
      }
      const second = await (await get("acme", `/${v1.id}/versions?limit=1&offset=1`)).json();
      expect(second.data.map((d: { id: string }) => d.id)).toEqual([v2.id]);
      const acme = createConnectTransport({
        baseUrl: server().baseUrl,
        httpVersion: "1.1",
        interceptors: [withAuthorization(await as("acme"))],
      });
      const rpc = await createClient(AgentDefinitionService, acme).listAgentDefinitionVersions({
        tenant: "acme",
        id: v2.reference_id,
      });
      expect(rpc.data.map((d) => d.id)).toEqual([v3.id, v2.id, v1.id]);
    });

    it("links a new version to the agent the request id names, even under another name", async () => {
      const v1 = (await post("acme", minimalDefinition({ name: "Renamed" }))).body;
      const v2 = (await post("acme", minimalDefinition({ id: v1.id, name: "Renamed Again", version: "2" }))).body;
      expect(v2.reference_id).toBe(v1.reference_id);
      const v3 = (await post("acme", minimalDefinition({ id: v1.reference_id, name: "Renamed Thrice", version: "3" })))
        .body;
      expect(v3.reference_id).toBe(v1.reference_id);
    });

    it("refuses a request id that names nothing, or another agent than the key's instance", async () => {
      const unknown = await post("acme", minimalDefinition({ name: "Linked", id: "0".repeat(32) }));
      expect(unknown.status).toBe(400);
      expect(unknown.body.errors).toEqual([expect.objectContaining({ code: "UNKNOWN_AGENT", field: "id" })]);
      const a = (await post("acme", minimalDefinition({ name: "Mine" }))).body;
      const b = (await post("acme", minimalDefinition({ name: "Theirs" }))).body;
      const mismatch = await post("acme", minimalDefinition({ name: "Mine", id: b.id }));
      expect(mismatch.body.errors).toEqual([expect.objectContaining({ code: "AGENT_MISMATCH", field: "id" })]);
      expect(a.reference_id).not.toBe(b.reference_id);
    });

    it("answers 404 for versions of an unknown agent", async () => {
      const res = await get("acme", `/${encodeURIComponent("Agent_ID=ACME-99999")}/versions`);
      expect(res.status).toBe(404);
    });
  });

  describe("the spec's error codes, over REST and gRPC", () => {
    it("A2849: a tenant without a sequence generator", async () => {
      const res = await post("noseq", minimalDefinition());
      expect(res.status).toBe(400);
      expect(res.body.errors).toEqual([expect.objectContaining({ code: "A2849" })]);
      const grpc = await grpcUpsert("noseq", minimalDefinition());
      expect(grpc.code).toBe(grpcStatus.INVALID_ARGUMENT);
      expect(grpc.errors).toEqual([expect.objectContaining({ code: "A2849" })]);
    });

    it("A161: a third-party agent on the host platform", async () => {
      const def = minimalDefinition({ name: "Squatter", platform: { id: "Platform=HOST" } });
      const res = await post("acme", def);
      expect(res.status).toBe(400);
      expect(res.body.errors).toEqual([expect.objectContaining({ code: "A161", field: "id", path: "platform.id" })]);
      const grpc = await grpcUpsert("acme", def);
      expect(grpc.errors).toEqual([expect.objectContaining({ code: "A161", path: "platform.id" })]);
      const hosts = await post(
        "acme",
        minimalDefinition({ name: "Host's own", provider: { id: "Provider=HOST" }, platform: { id: "Platform=HOST" } }),
      );
      expect(hosts.status).toBe(201);
    });

    it("A3015: an externalAgentID another agent of the provider holds; versions of one agent share it", async () => {
      const first = await post("acme", minimalDefinition({ name: "Holder", externalAgentID: "ext-1" }));
      expect(first.status).toBe(201);
      expect(
        (await post("acme", minimalDefinition({ name: "Holder", version: "2", externalAgentID: "ext-1" }))).status,
      ).toBe(201);
      const clash = await post("acme", minimalDefinition({ name: "Intruder", externalAgentID: "ext-1" }));
      expect(clash.status).toBe(400);
      expect(clash.body.errors).toEqual([
        expect.objectContaining({ code: "A3015", field: "externalAgentID", path: "externalAgentID" }),
      ]);
      const grpc = await grpcUpsert("acme", minimalDefinition({ name: "Intruder", externalAgentID: "ext-1" }));
      expect(grpc.errors).toEqual([expect.objectContaining({ code: "A3015", field: "externalAgentID" })]);
      const otherProvider = await post(
        "acme",
        minimalDefinition({ name: "Intruder", provider: { id: "Provider=Other" }, externalAgentID: "ext-1" }),
      );
      expect(otherProvider.status).toBe(201);
    });

    it("an unknown tenant", async () => {
      const res = await post("ghost", minimalDefinition());
      expect(res.status).toBe(404);
      expect(res.body.errors).toEqual([expect.objectContaining({ code: "TENANT_NOT_FOUND" })]);
      const grpc = await grpcUpsert("ghost", minimalDefinition());
      expect(grpc.code).toBe(grpcStatus.NOT_FOUND);
      expect(grpc.errors).toEqual([expect.objectContaining({ code: "TENANT_NOT_FOUND" })]);
    });
  });
});
