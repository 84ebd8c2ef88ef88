import { create, fromJson } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { ListAgentDefinitionsRequestSchema } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { contractIssues, crossFieldIssues, unknownFieldIssues } from "../../src/domain/validation.js";
import { exampleDefinition, minimalDefinition } from "../support/definitions.js";

const definition = (json: Record<string, unknown>) => fromJson(AgentDefinitionSchema, json as never);

describe("contract rules (protovalidate)", () => {
  it("accepts the spec's example", () => {
    expect(contractIssues(AgentDefinitionSchema, definition(exampleDefinition()))).toEqual([]);
  });

  it("names the path of a nested violation in JSON names", () => {
    const def = definition(
      minimalDefinition({ skills: [{ id: "s", name: "n", description: "d", inputModes: [{ type: "" }] }] }),
    );
    expect(contractIssues(AgentDefinitionSchema, def)).toEqual([
      {
        code: "REQUIRED",
        field: "type",
        path: "skills[0].inputModes[0].type",
        message: "skills[0].inputModes[0].type value is required.",
      },
    ]);
  });

  it("requires at least one skill and a provider", () => {
    const { skills: _s, provider: _p, ...rest } = minimalDefinition();
    const codes = contractIssues(AgentDefinitionSchema, definition(rest)).map((i) => [i.code, i.path]);
    expect(codes).toEqual([
      ["REQUIRED", "provider"],
      ["REQUIRED", "skills"],
    ]);
  });

  it("accepts both forms of an instance id and refuses others", () => {
    const ok = ["Provider=Acme", "0123456789abcdef0123456789abcdef"];
    const bad = ["Acme", "Provider = Acme", "0123456789ABCDEF0123456789ABCDEF", "=x", "Provider="];
    for (const id of ok)
      expect(contractIssues(AgentDefinitionSchema, definition(minimalDefinition({ provider: { id } })))).toEqual([]);
    for (const id of bad) {
      const issues = contractIssues(AgentDefinitionSchema, definition(minimalDefinition({ provider: { id } })));
      expect(
        issues.map((i) => i.code),
        id,
      ).toEqual(["PATTERN_MISMATCH"]);
    }
  });

  it("allows MimeType.type of exactly 80 characters and refuses 81", () => {
    const withType = (type: string) => definition(minimalDefinition({ defaultOutputModes: [{ type }] }));
    expect(contractIssues(AgentDefinitionSchema, withType("a".repeat(80)))).toEqual([]);
    expect(contractIssues(AgentDefinitionSchema, withType("a".repeat(81))).map((i) => i.code)).toEqual(["TOO_LONG"]);
  });

  it("requires agent_resource.type to be AGENT_ACTION when present", () => {
    const withType = (type: string) =>
      definition(
        minimalDefinition({
          hostConfig: [
            {
              skillId: "s1",
              executionMode: { id: "Mode=Delegate" },
              hostResources: [{ tool_name: "t", description: "d", agent_resource: { id: "x", type } }],
            },
          ],
        }),
      );
    expect(contractIssues(AgentDefinitionSchema, withType("AGENT_ACTION"))).toEqual([]);
    expect(contractIssues(AgentDefinitionSchema, withType("ACTION")).map((i) => [i.code, i.path])).toEqual([
      ["NOT_ALLOWED", "hostConfig[0].hostResources[0].agent_resource.type"],
    ]);
  });

  it("checks the page of a list request", () => {
    const issues = contractIssues(
      ListAgentDefinitionsRequestSchema,
      create(ListAgentDefinitionsRequestSchema, { limit: 0, offset: -5, tenant: "bad tenant" }),
    );
    expect(issues.map((i) => [i.code, i.path])).toEqual([
      ["PATTERN_MISMATCH", "tenant"],
      ["OUT_OF_RANGE", "limit"],
      ["OUT_OF_RANGE", "offset"],
    ]);
  });
});

describe("cross-field rules", () => {
  it("refuses a second skill with the same id and a hostConfig naming no skill, once each", () => {
    const def = definition(
      minimalDefinition({
        skills: [
          { id: "a", name: "a", description: "a" },
          { id: "a", name: "b", description: "b" },
        ],
        hostConfig: [
          { skillId: "a", executionMode: { id: "Mode=Ambient" } },
          { skillId: "a", executionMode: { id: "Mode=Ambient" } },
          { skillId: "zzz", executionMode: { id: "Mode=Ambient" } },
        ],
      }),
    );
    expect(crossFieldIssues(def).map((i) => [i.code, i.path])).toEqual([
      ["DUPLICATE_SKILL_ID", "skills[1].id"],
      ["DUPLICATE_SKILL_RESOURCE", "hostConfig[1].skillId"],
      ["UNKNOWN_SKILL", "hostConfig[2].skillId"],
    ]);
  });

  it("has nothing to say about the example", () => {
    expect(crossFieldIssues(definition(exampleDefinition()))).toEqual([]);
  });
});

describe("unknown binary fields", () => {
  it("are reported with the JSON path of the message that carried them", () => {
    const def = definition(exampleDefinition());
    def.hostConfig[0]!.hostResources[1]!.$unknown = [{ no: 42, wireType: 0, data: new Uint8Array([1]) }];
    expect(unknownFieldIssues(AgentDefinitionSchema, def)).toEqual([
      expect.objectContaining({ code: "UNKNOWN_FIELD", path: "hostConfig[0].hostResources[1].#42" }),
    ]);
  });
});
