import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { UpsertAgentDefinitionRequestSchema } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { RegistryError } from "../../src/domain/errors.js";
import { checkJsonBody, messageOfCheckedJson } from "../../src/surfaces/encoding/body-check.js";

const bytes = (text: string) => new TextEncoder().encode(text);
const valid = {
  name: "A",
  description: "D",
  url: "https://a.example.com",
  version: "1",
  provider: { id: "Provider=Acme" },
  skills: [{ id: "s", name: "S", description: "D" }],
};

/** The problem of a check that must refuse: its summary and items. */
function refused(check: ReturnType<typeof checkJsonBody>) {
  expect(check.problem).toBeInstanceOf(RegistryError);
  return {
    message: check.problem?.message,
    issues: check.problem?.issues.map(({ code, field, path }) => ({ code, field, path })),
  };
}

describe("the one body check", () => {
  it("answers the JSON value of a body that passes", () => {
    expect(checkJsonBody(bytes(JSON.stringify(valid)), AgentDefinitionSchema).value).toEqual(valid);
  });

  it.each([
    ["invalid UTF-8", new Uint8Array([0x7b, 0xff, 0x7d]), "The body is not valid UTF-8."],
    ["an empty body", bytes("  \n"), "The body is empty; a JSON object was expected."],
    ["text that is not JSON", bytes('{"name":'), /^The body is not valid JSON: /],
  ])("refuses %s as MALFORMED_JSON, named as the part it was sent as", (_, body, message) => {
    const { message: summary, issues } = refused(
      checkJsonBody(body, AgentDefinitionSchema, { sentAs: "agentCardAndTools" }),
    );
    expect(summary).toMatch(message);
    expect(issues).toEqual([{ code: "MALFORMED_JSON", field: "agentCardAndTools", path: "agentCardAndTools" }]);
  });

  it("names every unknown member and wrong type with its path, and sums them up once", () => {
    const body = { ...valid, colour: "red", version: 3, skills: [{ id: "s", name: "S", description: "D", size: 1 }] };
    const { message, issues } = refused(checkJsonBody(bytes(JSON.stringify(body)), AgentDefinitionSchema));
    expect(message).toBe("The request has 3 problems.");
    // In the order of the body's members.
    expect(issues).toEqual([
      { code: "INVALID_TYPE", field: "version", path: "version" },
      { code: "UNKNOWN_FIELD", field: "size", path: "skills[0].size" },
      { code: "UNKNOWN_FIELD", field: "colour", path: "colour" },
    ]);
  });

  it("gives a whole request's issues inside its body field relative to it, as REST gives the body's own", () => {
    const request = { agentCardAndTools: { ...valid, colour: "red" } };
    const { message, issues } = refused(
      checkJsonBody(bytes(JSON.stringify(request)), UpsertAgentDefinitionRequestSchema, {
        bodyField: "agentCardAndTools",
      }),
    );
    // One problem: the summary is the problem itself, its message relative too.
    expect(message).toBe("colour is not a member of AgentDefinition.");
    expect(issues).toEqual([{ code: "UNKNOWN_FIELD", field: "colour", path: "colour" }]);
  });

  it("names a member given twice by its path", () => {
    const { issues } = refused(checkJsonBody(bytes('{"name":"a","name":"b"}'), AgentDefinitionSchema));
    expect(issues).toEqual([{ code: "DUPLICATE_KEY", field: "name", path: "name" }]);
  });

  it("takes proto names only when asked (Connect JSON), never for REST", () => {
    const body = bytes(JSON.stringify({ ...valid, external_agent_id: "x" }));
    expect(refused(checkJsonBody(body, AgentDefinitionSchema)).issues).toEqual([
      { code: "UNKNOWN_FIELD", field: "external_agent_id", path: "external_agent_id" },
    ]);
    expect(checkJsonBody(body, AgentDefinitionSchema, { protoNames: true }).problem).toBeUndefined();
  });

  it(
    "decodes a checked value, and answers a protobuf JSON rule the check does not know as INVALID_VALUE, not a " +
      "500",
    () => {
      expect(messageOfCheckedJson(AgentDefinitionSchema, valid).name).toBe("A");
      let error: unknown;
      try {
        messageOfCheckedJson(AgentDefinitionSchema, { ...valid, supportsAuthenticatedExtendedCard: "maybe" });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(RegistryError);
      expect((error as RegistryError).issues[0]?.code).toBe("INVALID_VALUE");
    },
  );
});
