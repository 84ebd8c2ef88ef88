import { describe, expect, it } from "vitest";
import { AgentDefinitionService } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { TenantAdminService } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { buildRouteTable, matchRoute } from "../../src/surfaces/rest/route-table.js";

describe("the REST route table", () => {
  const table = buildRouteTable([AgentDefinitionService, TenantAdminService]);

  it("has both base paths of every RPC, from the google.api.http rules", () => {
    expect(table.map((r) => `${r.verb} ${r.template} -> ${r.method.name}`)).toEqual([
      "GET /api/asor/v1/{tenant}/agentDefinition -> ListAgentDefinitions",
      "GET /asor/v1/agentDefinition -> ListAgentDefinitions",
      "GET /api/asor/v1/{tenant}/agentDefinition/{id} -> GetAgentDefinition",
      "GET /asor/v1/agentDefinition/{id} -> GetAgentDefinition",
      "GET /api/asor/v1/{tenant}/agentDefinition/{id}/versions -> ListAgentDefinitionVersions",
      "GET /asor/v1/agentDefinition/{id}/versions -> ListAgentDefinitionVersions",
      "GET /api/asor/v1/{tenant}/agentDefinition/{id}/agentCard -> GetAgentCard",
      "GET /asor/v1/agentDefinition/{id}/agentCard -> GetAgentCard",
      "GET /a2a/{tenant}/{agent}/.well-known/agent-card.json -> GetAgentBaseCard",
      "GET /a2a/{tenant}/{agent} -> GetAgentBaseCard",
      "GET /api/asor/v1/{tenant}/.well-known/ai-catalog.json -> GetAiCatalog",
      "GET /.well-known/ai-catalog.json -> GetAiCatalog",
      "POST /api/asor/v1/{tenant}/agentDefinition -> UpsertAgentDefinition",
      "POST /asor/v1/agentDefinition -> UpsertAgentDefinition",
      "PUT /api/asor/v1/{tenant}/agentDefinition/{id} -> UpdateAgentDefinition",
      "PUT /asor/v1/agentDefinition/{id} -> UpdateAgentDefinition",
      "PATCH /api/asor/v1/{tenant}/agentDefinition/{id}/status -> SetAgentDefinitionStatus",
      "PATCH /asor/v1/agentDefinition/{id}/status -> SetAgentDefinitionStatus",
      "POST /api/asor/v1/{tenant}/agentDefinition/{id}/probe -> ProbeAgentDefinition",
      "POST /asor/v1/agentDefinition/{id}/probe -> ProbeAgentDefinition",
      "GET /api/asor/v1/{tenant}/agentDefinitionEvents -> WatchAgentDefinitions",
      "GET /asor/v1/agentDefinitionEvents -> WatchAgentDefinitions",
      "POST /asor/v1/admin/tenants -> CreateTenant",
      "GET /asor/v1/admin/tenants -> ListTenants",
      "GET /asor/v1/admin/tenants/{name} -> GetTenant",
      "PATCH /asor/v1/admin/tenants/{name} -> UpdateTenant",
      "PUT /asor/v1/admin/tenants/{tenant}/providers/{provider_id}/keys -> SetProviderKeys",
      "GET /asor/v1/admin/tenants/{tenant}/providers/{provider_id}/keys -> GetProviderKeys",
      "DELETE /asor/v1/admin/tenants/{tenant}/providers/{provider_id}/keys/{kid} -> RevokeProviderKey",
    ]);
    expect(table.filter((r) => r.verb === "POST").map((r) => r.body)).toEqual([
      "agent_card_and_tools",
      "agent_card_and_tools",
      // A probe takes no body: an action on the version its path names (issue 44).
      "",
      "",
      "*",
    ]);
    expect(table.filter((r) => r.verb === "PUT" || r.verb === "PATCH").map((r) => r.body)).toEqual([
      "agent_card_and_tools",
      "agent_card_and_tools",
      "status_change",
      "status_change",
      "settings",
      "jwks",
    ]);
  });

  it("matches path variables and nothing else", () => {
    const get = table[2]!;
    expect(matchRoute(get, ["api", "asor", "v1", "acme", "agentDefinition", "abc"])).toEqual(
      new Map([
        ["tenant", "acme"],
        ["id", "abc"],
      ]),
    );
    expect(matchRoute(get, ["api", "asor", "v1", "acme", "agentDefinition"])).toBeUndefined();
    expect(matchRoute(get, ["api", "asor", "v1", "", "agentDefinition", "abc"])).toBeUndefined();
    expect(matchRoute(get, ["api", "asor", "v2", "acme", "agentDefinition", "abc"])).toBeUndefined();
  });

  it("refuses two bindings of the same verb and template", () => {
    expect(() => buildRouteTable([AgentDefinitionService, AgentDefinitionService])).toThrow(/both bind GET/);
  });
});
