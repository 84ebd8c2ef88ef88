/**
 * The operations every surface runs, called directly, without a network: the
 * policy (admit), the tenant check, validation and the service behind them,
 * on a real embedded database.
 */
import { create, fromJsonString, toJson } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AgentDefinitionService,
  ProbeAgentDefinitionRequestSchema,
  WatchAgentDefinitionsRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { TenantAdminService } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import type { Principal } from "../../src/auth/principal.js";
import { parseConfig } from "../../src/config.js";
import { RegistryError } from "../../src/domain/errors.js";
import { admit, type Call, type Operation, type Operations, type Result } from "../../src/operations/operation.js";
import { createRegistryOperations } from "../../src/operations/registry-operations.js";
import { createProviderKeyService } from "../../src/service/provider-key-service.js";
import { createRegistryService } from "../../src/service/registry-service.js";
import { createTenantService } from "../../src/service/tenant-service.js";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { minimalDefinition } from "../support/definitions.js";

const caller = (domains: string[], tenant: string | null = "default"): Call => ({
  principal: { subject: "test", tenant, domains: new Set(domains), platformAdmin: false } satisfies Principal,
});
const EVERYTHING = caller(["Development", "Setup: Agents", "Setup: Tenants"]);

async function failure(promise: Promise<unknown>): Promise<RegistryError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(RegistryError);
  return err as RegistryError;
}

const decode = (result: Result) => {
  if (result.kind !== "definition") throw new Error(`expected a definition, got ${result.kind}`);
  return fromJsonString(AgentDefinitionSchema, new TextDecoder().decode(result.stored.json));
};

describe("the registry operations, in memory", () => {
  const [sqlite] = testDatabases();
  let database: FreshDatabase;
  let repository: AgentDefinitionRepository;
  let operations: Operations;
  const op = (method: { name: string }): Operation => {
    const found = [...operations.values()].find((o) => o.method.name === method.name);
    if (found === undefined) throw new Error(`no operation ${method.name}`);
    return found;
  };

  beforeAll(async () => {
    database = await sqlite!.create();
    const config = parseConfig({ DATA_DIR: database.dataDir });
    repository = await createSqlRepository({
      databaseUrl: undefined,
      dataDir: database.dataDir,
      timeoutMs: 10_000,
    });
    operations = createRegistryOperations({
      service: createRegistryService({ repository, host: config.hostSystem }),
      tenants: createTenantService(repository),
      providerKeys: createProviderKeyService(repository),
      defaultTenant: config.defaultTenant,
      adminDomain: config.adminDomain,
      claims: config.auth,
    });
  });
  afterAll(async () => {
    await repository.close();
    await database.cleanup();
  });

  it("says which part this server lacks, with no prober and no watch: 503 naming it, not the database", async () => {
    const probe = await failure(
      op(AgentDefinitionService.method.probeAgentDefinition).run(
        EVERYTHING,
        create(ProbeAgentDefinitionRequestSchema, { id: "0".repeat(32) }),
      ),
    );
    expect(probe).toMatchObject({
      code: "UNAVAILABLE",
      message: "This server does not probe agents (PROBE_ENABLED=false).",
    });
    const watch = await failure(
      op(AgentDefinitionService.method.watchAgentDefinitions).run(
        EVERYTHING,
        create(WatchAgentDefinitionsRequestSchema),
      ),
    );
    expect(watch).toMatchObject({ code: "UNAVAILABLE", message: "This server does not serve watches." });
  });

  it("has one operation for every RPC of both services", () => {
    const rpcs = [...AgentDefinitionService.methods, ...TenantAdminService.methods];
    expect([...operations.keys()].sort((a, b) => a.name.localeCompare(b.name))).toEqual(
      rpcs.sort((a, b) => a.name.localeCompare(b.name)),
    );
  });

  it("registers a definition and reads it back by id and by Agent_ID, with the same bytes", async () => {
    const upsert = op(AgentDefinitionService.method.upsertAgentDefinition);
    const input = create(upsert.method.input, {
      agentCardAndTools: fromJsonString(
        AgentDefinitionSchema,
        JSON.stringify(minimalDefinition({ version: "in-memory" })),
      ),
    } as never);
    const written = await upsert.run(EVERYTHING, input);
    expect(written.kind).toBe("definition");
    if (written.kind !== "definition") return;
    expect(written.created).toBe(true);
    const get = op(AgentDefinitionService.method.getAgentDefinition);
    const byId = await get.run(EVERYTHING, create(get.method.input, { id: written.stored.id } as never));
    const byAgent = await get.run(EVERYTHING, create(get.method.input, { id: decode(written).referenceId } as never));
    if (byId.kind !== "definition" || byAgent.kind !== "definition") throw new Error("expected definitions");
    expect(new TextDecoder().decode(byId.stored.json)).toBe(new TextDecoder().decode(written.stored.json));
    expect(byId.stored.binary).toEqual(written.stored.binary);
    expect(byAgent.stored.id).toBe(written.stored.id);
    expect(toJson(AgentDefinitionSchema, decode(byId))).toMatchObject({
      name: minimalDefinition().name,
      version: "in-memory",
    });
  });

  it("lists pages of stored definitions", async () => {
    const list = op(AgentDefinitionService.method.listAgentDefinitions);
    const result = await list.run(EVERYTHING, create(list.method.input, { limit: 5 } as never));
    if (result.kind !== "page") throw new Error("expected a page");
    expect(result.page.total).toBeGreaterThanOrEqual(1);
    expect(result.page.data.length).toBe(Math.min(5, result.page.total));
  });

  it("refuses a caller whose token is for another tenant, naming both", async () => {
    const list = op(AgentDefinitionService.method.listAgentDefinitions);
    const err = await failure(
      list.run(caller(["Development"], "acme"), create(list.method.input, { tenant: "default" } as never)),
    );
    expect(err.code).toBe("PERMISSION_DENIED");
    expect(err.message).toContain('"acme"');
  });

  it("answers an unknown tenant with TENANT_NOT_FOUND", async () => {
    const get = op(AgentDefinitionService.method.getAgentDefinition);
    const err = await failure(
      get.run(caller(["Setup: Agents"], "nowhere"), create(get.method.input, { id: "0".repeat(32) } as never)),
    );
    expect(err.code).toBe("TENANT_NOT_FOUND");
  });

  it("validates before it writes: an invalid definition leaves nothing behind", async () => {
    const upsert = op(AgentDefinitionService.method.upsertAgentDefinition);
    const list = op(AgentDefinitionService.method.listAgentDefinitions);
    const before = await list.run(EVERYTHING, create(list.method.input, {} as never));
    const bad = fromJsonString(
      AgentDefinitionSchema,
      JSON.stringify(minimalDefinition({ name: "", version: "invalid" })),
    );
    const err = await failure(upsert.run(EVERYTHING, create(upsert.method.input, { agentCardAndTools: bad } as never)));
    expect(err.code).toBe("VALIDATION_FAILED");
    expect(err.issues.map((i) => i.path)).toContain("name");
    const after = await list.run(EVERYTHING, create(list.method.input, {} as never));
    if (before.kind !== "page" || after.kind !== "page") throw new Error("expected pages");
    expect(after.page.total).toBe(before.page.total);
  });

  it("admits only callers with one of the operation's domains (docs/contract.md, Security)", () => {
    const get = op(AgentDefinitionService.method.getAgentDefinition);
    const list = op(AgentDefinitionService.method.listAgentDefinitions);
    const createTenant = op(TenantAdminService.method.createTenant);
    expect(() => admit(get, caller(["Setup: Agents"]).principal)).not.toThrow();
    expect(() => admit(list, caller(["Development"]).principal)).not.toThrow();
    for (const [operation, domains] of [
      [get, ["Development"]],
      [createTenant, ["Development", "Setup: Agents"]],
    ] as const) {
      let thrown: unknown;
      try {
        admit(operation, caller([...domains]).principal);
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(RegistryError);
      expect((thrown as RegistryError).code).toBe("PERMISSION_DENIED");
    }
  });

  it(
    "admits to the tenant admin operations only platform operators: callers with the platform admin claim, not " +
      "those only without a tenant claim",
    () => {
      const listTenants = op(TenantAdminService.method.listTenants);
      const admin = (tenant: string | null, platformAdmin: boolean) => ({
        subject: "t",
        tenant,
        domains: new Set(["Setup: Tenants"]),
        platformAdmin,
      });
      expect(() => admit(listTenants, admin(null, true))).not.toThrow();
      expect(() => admit(listTenants, admin("acme", true))).not.toThrow();
      expect(() => admit(listTenants, admin("acme", false))).toThrow(
        /acts on every tenant.*"platform_admin": true.*not one for tenant "acme"/,
      );
      expect(() => admit(listTenants, admin(null, false))).toThrow(
        /acts on every tenant.*"platform_admin": true.*not one without it/,
      );
      // The agent operations are the tenant's own: the tenant claim is what scopes them.
      expect(() =>
        admit(op(AgentDefinitionService.method.listAgentDefinitions), {
          ...admin("acme", false),
          domains: new Set(["Development"]),
        }),
      ).not.toThrow();
    },
  );

  it("admits a tenant's own admin to its settings and keys, a platform operator to any tenant's", async () => {
    const getKeys = op(TenantAdminService.method.getProviderKeys);
    const updateTenant = op(TenantAdminService.method.updateTenant);
    const admin = (tenant: string | null, platformAdmin = false): Call => ({
      principal: { subject: "t", tenant, domains: new Set(["Setup: Tenants"]), platformAdmin },
    });
    const keysOf = (tenant: string) =>
      create(getKeys.method.input, { tenant, providerId: "Provider=p" } as never) as never;
    // Not platform operations: the domain alone admits, the tenant is checked when the request is known.
    expect(getKeys.platform).toBeUndefined();
    expect(() => admit(getKeys, admin("default").principal)).not.toThrow();
    expect((await getKeys.run(admin("default"), keysOf("default"))).kind).toBe("message");
    expect((await getKeys.run(admin("other", true), keysOf("default"))).kind).toBe("message");
    const other = await failure(getKeys.run(admin("other"), keysOf("default")));
    expect(other).toMatchObject({
      code: "PERMISSION_DENIED",
      message: expect.stringContaining('"other", not "default"'),
    });
    const settings = create(updateTenant.method.input, { name: "default", settings: {} } as never) as never;
    expect((await failure(updateTenant.run(admin("other"), settings))).code).toBe("PERMISSION_DENIED");
    expect(() => admit(getKeys, { ...admin("default").principal, domains: new Set(["Setup: Agents"]) })).toThrow(
      /needs the security domain "Setup: Tenants"/,
    );
  });

  it("sets up tenants through the admin operations", async () => {
    const createTenant = op(TenantAdminService.method.createTenant);
    const created = await createTenant.run(
      EVERYTHING,
      create(createTenant.method.input, { name: "in-memory", sequencePrefix: "MEM-" } as never),
    );
    expect(created.kind).toBe("message");
    const again = await failure(
      createTenant.run(EVERYTHING, create(createTenant.method.input, { name: "in-memory" } as never)),
    );
    expect(again.code).toBe("TENANT_EXISTS");
  });
});
