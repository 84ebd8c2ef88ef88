/**
 * withoutDerivedFields undoes withDerivedFields: what `asor export` writes and `asor apply` compares is the
 * content a client sent, every read-only member the registry fills in cleared.
 */
import { clone, create, equals, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema, RegistryMetaSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { withDerivedFields, withoutDerivedFields } from "../../src/domain/derived-fields.js";
import fixture from "../fixtures/customer-service-agent.json" with { type: "json" };

const sent = () => fromJson(AgentDefinitionSchema, fixture as JsonValue);

describe("withoutDerivedFields", () => {
  it("gives back what the client sent, from what the registry stores of it", () => {
    const stored = withDerivedFields(sent(), "0123456789abcdef0123456789abcdef", "Agent_ID=AGENT-7");
    expect(equals(AgentDefinitionSchema, stored, sent())).toBe(false);
    expect(equals(AgentDefinitionSchema, withoutDerivedFields(stored), sent())).toBe(true);
  });

  it("clears read-only members a client sent too (they would be replaced), and meta", () => {
    const def = clone(AgentDefinitionSchema, sent());
    def.provider!.descriptor = "Mine";
    def.provider!.href = "https://x.example";
    def.skills[0]!.tags[0]!.id = "feedfeedfeedfeedfeedfeedfeedfeed";
    def.hostConfig[0]!.hostResources[2]!.tools[0]!.descriptor = "a tool";
    def.meta = create(RegistryMetaSchema, { revision: 3 });
    expect(equals(AgentDefinitionSchema, withoutDerivedFields(def), sent())).toBe(true);
  });

  it("keeps what a client writes, the resource's own descriptor included", () => {
    const def = sent();
    def.hostConfig[0]!.hostResources[0]!.agentResource!.descriptor = "Workers";
    expect(withoutDerivedFields(def).hostConfig[0]!.hostResources[0]!.agentResource!.descriptor).toBe("Workers");
  });
});
