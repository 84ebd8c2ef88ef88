import { hash } from "node:crypto";
import { clone } from "@bufbuild/protobuf";
import type { AgentDefinition, MimeType } from "../../gen/asor/v1/agent_definition_pb.js";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";

/**
 * The derived id of the nested object at `path` in definition `definitionId`:
 * the first 32 hex characters of SHA-256(definitionId NUL path). The same on
 * every read of an instance, and different across instances. Synchronous
 * (node:crypto, on Deno too): WebCrypto's async digest took a thread-pool
 * round trip per id, a dozen per write, inside the write's transaction.
 */
export function derivedId(definitionId: string, path: string): string {
  // The one-shot hash: no Hash object per id (half the time of createHash's on Node 20).
  return hash("sha256", `${definitionId}\u0000${path}`, "hex").slice(0, 32);
}

/** The display name of a reference id: the value after `=`, or the id itself. */
export function descriptorOf(referenceId: string): string {
  const eq = referenceId.indexOf("=");
  return eq === -1 ? referenceId : referenceId.slice(eq + 1);
}

/** The reference id inside `<key>=<value>`, empty for a 32-hex host id. */
function referenceIdOf(referenceId: string): string {
  return referenceId.includes("=") ? descriptorOf(referenceId) : "";
}

function assignModes(definitionId: string, modes: MimeType[], path: string): void {
  modes.forEach((mode, i) => {
    mode.id = derivedId(definitionId, `${path}[${i}]`);
  });
}

/**
 * The definition as the registry stores and answers it: `id` and the agent's
 * `reference_id` set, read-only
 * members recomputed from what the client sent (derived ids, descriptors,
 * reference ids), and read-only members it cannot compute cleared (`href`,
 * tool descriptors), so nothing a client sends as read-only is kept.
 */
export function withDerivedFields(input: AgentDefinition, id: string, referenceId: string): AgentDefinition {
  const def = clone(AgentDefinitionSchema, input);
  def.id = id;
  def.referenceId = referenceId;
  if (def.provider) {
    def.provider.descriptor = descriptorOf(def.provider.id);
    def.provider.href = "";
  }
  if (def.platform) {
    def.platform.descriptor = descriptorOf(def.platform.id);
    def.platform.referenceId = referenceIdOf(def.platform.id);
  }
  assignModes(id, def.defaultInputModes, "defaultInputModes");
  assignModes(id, def.defaultOutputModes, "defaultOutputModes");
  def.skills.forEach((skill, i) => {
    const at = `skills[${i}]`;
    assignModes(id, skill.inputModes, `${at}.inputModes`);
    assignModes(id, skill.outputModes, `${at}.outputModes`);
    skill.tags.forEach((tag, j) => {
      tag.id = derivedId(id, `${at}.tags[${j}]`);
    });
  });
  def.hostConfig.forEach((item, i) => {
    const at = `hostConfig[${i}]`;
    item.id = derivedId(id, at);
    if (item.executionMode) {
      item.executionMode.descriptor = descriptorOf(item.executionMode.id);
      item.executionMode.href = "";
    }
    item.hostResources.forEach((resource, j) => {
      resource.id = derivedId(id, `${at}.hostResources[${j}]`);
      for (const tool of resource.tools) tool.descriptor = "";
    });
  });
  return def;
}

/**
 * The definition with every read-only member withDerivedFields sets cleared (and `id`, the agent's
 * `reference_id` and `meta`): what a client would write to get `def` stored. withDerivedFields of it is `def`
 * again, for the definition's own `id` and `reference_id`. `asor export` writes it; `asor apply` compares with it.
 */
export function withoutDerivedFields(input: AgentDefinition): AgentDefinition {
  const def = clone(AgentDefinitionSchema, input);
  def.id = "";
  def.referenceId = "";
  def.meta = undefined;
  if (def.provider) {
    def.provider.descriptor = "";
    def.provider.href = "";
  }
  if (def.platform) {
    def.platform.descriptor = "";
    def.platform.referenceId = "";
  }
  const modes = [...def.defaultInputModes, ...def.defaultOutputModes];
  for (const skill of def.skills) {
    modes.push(...skill.inputModes, ...skill.outputModes);
    for (const tag of skill.tags) tag.id = "";
  }
  for (const mode of modes) mode.id = "";
  for (const item of def.hostConfig) {
    item.id = "";
    if (item.executionMode) {
      item.executionMode.descriptor = "";
      item.executionMode.href = "";
    }
    for (const resource of item.hostResources) {
      resource.id = "";
      for (const tool of resource.tools) tool.descriptor = "";
    }
  }
  return def;
}
