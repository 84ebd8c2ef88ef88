import { clone } from "@bufbuild/protobuf";
import type { AgentDefinition, MimeType } from "../../gen/asor/v1/agent_definition_pb.js";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";

const encoder = new TextEncoder();

/**
 * The derived id of the nested object at `path` in definition `definitionId`:
 * the first 32 hex characters of SHA-256(definitionId NUL path). The same on
 * every read of an instance, and different across instances.
 */
export async function derivedId(definitionId: string, path: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", encoder.encode(`${definitionId}\u0000${path}`));
  let hex = "";
  for (const byte of new Uint8Array(digest, 0, 16)) hex += byte.toString(16).padStart(2, "0");
  return hex;
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

async function assignModes(definitionId: string, modes: MimeType[], path: string): Promise<void> {
  await Promise.all(modes.map(async (mode, i) => (mode.id = await derivedId(definitionId, `${path}[${i}]`))));
}

/**
 * The definition as the registry stores and answers it: `id` and the agent's
 * `reference_id` set, read-only
 * members recomputed from what the client sent (derived ids, descriptors,
 * reference ids), and read-only members it cannot compute cleared (`href`,
 * tool descriptors), so nothing a client sends as read-only is kept.
 */
export async function withDerivedFields(input: AgentDefinition, id: string, referenceId: string): Promise<AgentDefinition> {
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
  const work: Promise<void>[] = [
    assignModes(id, def.defaultInputModes, "defaultInputModes"),
    assignModes(id, def.defaultOutputModes, "defaultOutputModes"),
  ];
  def.skills.forEach((skill, i) => {
    const at = `skills[${i}]`;
    work.push(assignModes(id, skill.inputModes, `${at}.inputModes`), assignModes(id, skill.outputModes, `${at}.outputModes`));
    skill.tags.forEach((tag, j) => work.push(derivedId(id, `${at}.tags[${j}]`).then((v) => void (tag.id = v))));
  });
  def.hostConfig.forEach((item, i) => {
    const at = `hostConfig[${i}]`;
    work.push(derivedId(id, at).then((v) => void (item.id = v)));
    if (item.executionMode) {
      item.executionMode.descriptor = descriptorOf(item.executionMode.id);
      item.executionMode.href = "";
    }
    item.hostResources.forEach((resource, j) => {
      work.push(derivedId(id, `${at}.hostResources[${j}]`).then((v) => void (resource.id = v)));
      for (const tool of resource.tools) tool.descriptor = "";
    });
  });
  await Promise.all(work);
  return def;
}
