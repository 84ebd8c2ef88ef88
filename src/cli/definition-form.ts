/**
 * A definition as a file holds it: its content without the members the registry fills in (derived-fields.ts
 * withoutDerivedFields), so a file and a stored definition compare equal when a POST of the file would change
 * nothing, and an exported file is what a client would write.
 */
import { equals, fromJson, type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import { type AgentDefinition, AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { withoutDerivedFields } from "../domain/derived-fields.js";

/** A stored definition's JSON (as the registry answers it) as a message; members a newer registry added aside. */
export function storedDefinition(json: unknown): AgentDefinition {
  return fromJson(AgentDefinitionSchema, json as JsonValue, { ignoreUnknownFields: true });
}

/** `def`'s content as a file holds it: without its read-only members. */
export function fileForm(def: AgentDefinition): AgentDefinition {
  return withoutDerivedFields(def);
}

/** The JSON of `def`'s content, the contract's JSON names, members at their defaults left out. */
export function fileJson(def: AgentDefinition): JsonObject {
  return toJson(AgentDefinitionSchema, fileForm(def)) as JsonObject;
}

/** The top-level members (JSON names) whose content differs between `file` and `stored`; [] when equal. */
export function changedMembers(file: AgentDefinition, stored: AgentDefinition): string[] {
  const a = fileForm(file);
  const b = fileForm(stored);
  if (equals(AgentDefinitionSchema, a, b)) return [];
  const aJson = toJson(AgentDefinitionSchema, a) as JsonObject;
  const bJson = toJson(AgentDefinitionSchema, b) as JsonObject;
  const names = AgentDefinitionSchema.fields.map((f) => f.jsonName);
  return names.filter((name) => JSON.stringify(aJson[name]) !== JSON.stringify(bJson[name]));
}
