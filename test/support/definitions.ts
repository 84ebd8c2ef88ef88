import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The published specification's example definition (a copy in test/fixtures), as JSON. */
export function exampleDefinition(): Record<string, any> {
  const path = fileURLToPath(new URL("../fixtures/customer-service-agent.json", import.meta.url));
  return JSON.parse(readFileSync(path, "utf8"));
}

/** A small valid definition; `overrides` replace top-level members. */
export function minimalDefinition(overrides: Record<string, unknown> = {}): Record<string, any> {
  return {
    name: "Minimal Agent",
    description: "Does one thing",
    url: "https://agents.example.com/minimal",
    version: "1.0.0",
    provider: { id: "Provider=Acme" },
    skills: [{ id: "s1", name: "Skill one", description: "The one thing" }],
    ...overrides,
  };
}

/**
 * A JSON body without its empty lists, at every depth: REST answers show
 * every list member of the contract, `[]` when empty; protobuf JSON (gRPC
 * tools, Connect JSON) and most requests leave them out.
 */
export function withoutEmptyLists<T>(value: T): T {
  if (Array.isArray(value)) return value.map(withoutEmptyLists) as T;
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => !(Array.isArray(v) && v.length === 0))
      .map(([k, v]) => [k, withoutEmptyLists(v)]),
  ) as T;
}

/**
 * A response body without the members the service adds (ids, the agent's
 * reference id, derived ids, descriptors, hrefs, the registry's `meta`, and
 * `[]` for the lists left out): what is left must equal what was sent.
 */
export function withoutReadOnly(def: Record<string, any>): Record<string, any> {
  const copy = withoutEmptyLists(structuredClone(def));
  delete copy.id;
  delete copy.reference_id;
  delete copy.meta;
  const dropIds = (items?: Record<string, any>[]) => items?.forEach((i) => delete i.id);
  if (copy.provider) {
    delete copy.provider.descriptor;
    delete copy.provider.href;
  }
  if (copy.platform) {
    delete copy.platform.descriptor;
    delete copy.platform.reference_id;
  }
  dropIds(copy.defaultInputModes);
  dropIds(copy.defaultOutputModes);
  for (const skill of copy.skills ?? []) {
    dropIds(skill.tags);
    dropIds(skill.inputModes);
    dropIds(skill.outputModes);
  }
  for (const item of copy.hostConfig ?? []) {
    delete item.id;
    if (item.executionMode) {
      delete item.executionMode.descriptor;
      delete item.executionMode.href;
    }
    for (const resource of item.hostResources ?? []) {
      delete resource.id;
      for (const tool of resource.tools ?? []) delete tool.descriptor;
    }
  }
  return copy;
}

/** Every derived id in a response body, in document order. */
export function derivedIds(def: Record<string, any>): string[] {
  const ids: string[] = [];
  const take = (items?: Record<string, any>[]) => items?.forEach((i) => ids.push(i.id));
  take(def.defaultInputModes);
  take(def.defaultOutputModes);
  for (const skill of def.skills ?? []) {
    take(skill.tags);
    take(skill.inputModes);
    take(skill.outputModes);
  }
  for (const item of def.hostConfig ?? []) {
    ids.push(item.id);
    take(item.hostResources);
  }
  return ids;
}

/**
 * About 750 KB of JSON, under the 1 MiB body limit: 75 skills of 10,000 characters, named `Large Agent <i>`
 * (the memory tests of issues 25 and 50).
 */
export function largeDefinition(i: number): Record<string, any> {
  return minimalDefinition({
    name: `Large Agent ${i}`,
    skills: Array.from({ length: 75 }, (_, n) => ({
      id: `s${n}`,
      name: `Skill ${n}`,
      description: String.fromCharCode(97 + (n % 26)).repeat(10_000),
    })),
  });
}
