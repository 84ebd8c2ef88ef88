import { fromJson, toJson } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { decideUpsert, newDefinitionId, upsertKey } from "../../src/domain/upsert.js";
import { derivedId, descriptorOf } from "../../src/domain/derived-fields.js";
import type { AgentRecord } from "../../src/storage/repository.js";
import { derivedIds, exampleDefinition } from "../support/definitions.js";

const example = () => fromJson(AgentDefinitionSchema, exampleDefinition() as never);
const fixedId = "0123456789abcdef0123456789abcdef";

describe("the upsert decision", () => {
  it("creates with a new id when no instance holds the key", async () => {
    const def = await decideUpsert(undefined, example(), () => fixedId);
    expect(def.id).toBe(fixedId);
  });

  it("keeps the id of the instance that holds the key, whatever id the client sent", async () => {
    const existing = { id: "f".repeat(32) } as AgentRecord;
    const incoming = example();
    incoming.id = "e".repeat(32);
    const def = await decideUpsert(existing, incoming, () => fixedId);
    expect(def.id).toBe("f".repeat(32));
  });

  it("derives the same ids for the same instance, and different ones for another", async () => {
    const a = toJson(AgentDefinitionSchema, await decideUpsert(undefined, example(), () => fixedId)) as Record<string, unknown>;
    const b = toJson(AgentDefinitionSchema, await decideUpsert(undefined, example(), () => fixedId)) as Record<string, unknown>;
    const c = toJson(AgentDefinitionSchema, await decideUpsert(undefined, example(), () => "a".repeat(32))) as Record<string, unknown>;
    expect(derivedIds(a)).toEqual(derivedIds(b));
    expect(derivedIds(a).filter((id) => derivedIds(c).includes(id))).toEqual([]);
  });

  it("replaces read-only members a client sent with the registry's own", async () => {
    const incoming = example();
    incoming.provider!.descriptor = "Spoofed";
    incoming.provider!.href = "https://evil.example.com";
    incoming.skills[0]!.tags[0]!.id = "client-chosen";
    const def = await decideUpsert(undefined, incoming, () => fixedId);
    expect(def.provider).toMatchObject({ descriptor: "MyOrg", href: "" });
    expect(def.skills[0]!.tags[0]!.id).toBe(await derivedId(fixedId, "skills[0].tags[0]"));
  });

  it("does not change the definition it was given", async () => {
    const incoming = example();
    await decideUpsert(undefined, incoming, () => fixedId);
    expect(incoming.id).toBe("");
  });

  it("keys on name, provider id and version", () => {
    expect(upsertKey(example())).toEqual({ name: "Customer Service Intelligence Agent", providerId: "Provider=MyOrg", version: "1.0.0" });
  });
});

describe("ids and descriptors", () => {
  it("makes 32 lowercase hex ids, different each time", () => {
    const ids = new Set(Array.from({ length: 100 }, newDefinitionId));
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{32}$/);
  });

  it("shows the value of a key=value reference as its descriptor", () => {
    expect(descriptorOf("Provider=MyOrg")).toBe("MyOrg");
    expect(descriptorOf("Mode=Ambient")).toBe("Ambient");
    expect(descriptorOf(fixedId)).toBe(fixedId);
  });
});
