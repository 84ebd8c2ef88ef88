import { describe, expect, it } from "vitest";
import { AgentDefinitionService } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { TenantAdminService } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { bodyFieldOf, errorRelativeToBody, relativeToBody } from "../../src/domain/body-field.js";
import { invalid, RegistryError } from "../../src/domain/errors.js";

describe("the body field of a method, from its google.api.http rule", () => {
  it.each([
    [AgentDefinitionService.method.upsertAgentDefinition, "agentCardAndTools"],
    [AgentDefinitionService.method.updateAgentDefinition, "agentCardAndTools"],
    [AgentDefinitionService.method.setAgentDefinitionStatus, "statusChange"],
    [AgentDefinitionService.method.getAgentDefinition, undefined],
    [TenantAdminService.method.createTenant, undefined],
  ])("%s", (method, field) => {
    expect(bodyFieldOf(method)).toBe(field);
  });

  it("makes the paths inside the body field, and the messages that name them, relative to it", () => {
    const issues = [
      {
        code: "REQUIRED" as const,
        message: "agentCardAndTools.url is required.",
        field: "url",
        path: "agentCardAndTools.url",
      },
      { code: "INVALID_VALUE" as const, message: "etag is not an ETag.", field: "etag", path: "etag" },
    ];
    expect(relativeToBody(issues, "agentCardAndTools")).toEqual([
      { code: "REQUIRED", message: "url is required.", field: "url", path: "url" },
      { code: "INVALID_VALUE", message: "etag is not an ETag.", field: "etag", path: "etag" },
    ]);
    expect(relativeToBody(issues, undefined)).toEqual(issues);
  });

  it("gives a service's error relative to the body, keeping its code; leaves others as they are", () => {
    const error = invalid(
      [
        {
          code: "REQUIRED",
          message: "agentCardAndTools.url is required.",
          field: "url",
          path: "agentCardAndTools.url",
        },
      ],
      "agentCardAndTools.url is required.",
    );
    const relative = errorRelativeToBody(error, "agentCardAndTools") as RegistryError;
    expect(relative).toBeInstanceOf(RegistryError);
    expect([relative.code, relative.message, relative.issues[0]?.path]).toEqual([
      "VALIDATION_FAILED",
      "url is required.",
      "url",
    ]);
    const other = new Error("boom");
    expect(errorRelativeToBody(other, "agentCardAndTools")).toBe(other);
    expect(errorRelativeToBody(error, undefined)).toBe(error);
  });
});
