import { fromJson, toJson } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { derivedId, descriptorOf, withDerivedFields } from "../../src/domain/derived-fields.js";
import type { RegistryError } from "../../src/domain/errors.js";
import { hostPlatformIssues } from "../../src/domain/host-platform.js";
import { idForm, newDefinitionId, planUpsert, type UpsertFacts, upsertKey } from "../../src/domain/upsert.js";
import { derivedIds, exampleDefinition } from "../support/definitions.js";

const example = () => fromJson(AgentDefinitionSchema, exampleDefinition() as never);
const fixedId = "0123456789abcdef0123456789abcdef";
const agent = (number: number) => ({ number, referenceId: `Agent_ID=T-${number}` });
const none: UpsertFacts = {
  existingAgent: undefined,
  linkedAgent: undefined,
  agentByName: undefined,
  externalAgentId: undefined,
  externalIdOwner: undefined,
  existingDeactivated: false,
  agentDeactivated: false,
  mayReactivate: false,
};

/** The code of the issue planUpsert refuses with, or "ok". */
function refusal(facts: Partial<UpsertFacts>): string {
  try {
    planUpsert({ ...none, ...facts });
    return "ok";
  } catch (err) {
    return (err as RegistryError).issues.map((i) => `${i.code} on ${i.path}`).join(", ");
  }
}

describe("the upsert plan", () => {
  it("creates a new agent when nothing holds the key, nothing is linked and no agent has the name", () => {
    expect(planUpsert(none)).toEqual({ write: "insert", agent: "new", claimExternalId: false });
  });

  it("updates the instance that holds the key, in its own agent", () => {
    expect(planUpsert({ ...none, existingAgent: agent(3), linkedAgent: agent(3) })).toEqual({
      write: "update",
      agent: agent(3),
      claimExternalId: false,
    });
  });

  it("adds a version to the linked agent, before the agent with the same name", () => {
    expect(planUpsert({ ...none, linkedAgent: agent(2), agentByName: agent(5) })).toMatchObject({
      write: "insert",
      agent: agent(2),
    });
  });

  it("adds a version to the agent with the same provider and name when nothing is linked", () => {
    expect(planUpsert({ ...none, agentByName: agent(5) })).toMatchObject({ write: "insert", agent: agent(5) });
  });

  it("refuses an id that names nothing, and an id of another agent than the key's instance", () => {
    expect(refusal({ linkedAgent: "unknown" })).toBe("UNKNOWN_AGENT on id");
    expect(refusal({ existingAgent: agent(1), linkedAgent: agent(2) })).toBe("AGENT_MISMATCH on id");
  });

  it("claims a free externalAgentID, keeps one the agent holds, and refuses one another agent holds (A3015)", () => {
    expect(planUpsert({ ...none, externalAgentId: "x" }).claimExternalId).toBe(true);
    expect(
      planUpsert({ ...none, agentByName: agent(4), externalAgentId: "x", externalIdOwner: 4 }).claimExternalId,
    ).toBe(false);
    expect(refusal({ agentByName: agent(4), externalAgentId: "x", externalIdOwner: 9 })).toBe(
      "A3015 on externalAgentID",
    );
    expect(refusal({ externalAgentId: "x", externalIdOwner: 9 })).toBe("A3015 on externalAgentID");
  });
});

describe("deactivation as a control", () => {
  /** The code planUpsert refuses with, or "ok". */
  const verdict = (facts: Partial<UpsertFacts>): string => {
    try {
      planUpsert({ ...none, ...facts });
      return "ok";
    } catch (err) {
      return (err as RegistryError).code;
    }
  };

  it("refuses a caller that may not reactivate a change to a DEACTIVATED version, and admits one that may", () => {
    expect(verdict({ existingAgent: agent(3), existingDeactivated: true })).toBe("AGENT_DEACTIVATED");
    expect(verdict({ existingAgent: agent(3), existingDeactivated: true, mayReactivate: true })).toBe("ok");
    expect(verdict({ existingAgent: agent(3) })).toBe("ok");
  });

  it(
    "refuses such a caller a new version of an agent whose versions are all DEACTIVATED, linked or found by " + "name",
    () => {
      expect(verdict({ linkedAgent: agent(2), agentDeactivated: true })).toBe("AGENT_DEACTIVATED");
      expect(verdict({ agentByName: agent(5), agentDeactivated: true })).toBe("AGENT_DEACTIVATED");
      expect(verdict({ agentByName: agent(5), agentDeactivated: true, mayReactivate: true })).toBe("ok");
      expect(verdict({ agentByName: agent(5) })).toBe("ok");
    },
  );

  it("says nothing of a new agent, and leaves the other refusals first", () => {
    expect(verdict({ agentDeactivated: true })).toBe("ok");
    expect(verdict({ linkedAgent: "unknown", agentDeactivated: true })).toBe("VALIDATION_FAILED");
    expect(verdict({ existingAgent: agent(1), linkedAgent: agent(2), existingDeactivated: true })).toBe(
      "VALIDATION_FAILED",
    );
  });
});

describe("derived fields", () => {
  it("sets the id and the agent's reference id", async () => {
    const def = await withDerivedFields(example(), fixedId, "Agent_ID=T-1");
    expect([def.id, def.referenceId]).toEqual([fixedId, "Agent_ID=T-1"]);
  });

  it("derives the same ids for the same instance, and different ones for another", async () => {
    const of = async (id: string) =>
      derivedIds(
        toJson(AgentDefinitionSchema, await withDerivedFields(example(), id, "Agent_ID=T-1")) as Record<
          string,
          unknown
        >,
      );
    expect(await of(fixedId)).toEqual(await of(fixedId));
    const other = await of("a".repeat(32));
    expect((await of(fixedId)).filter((id) => other.includes(id))).toEqual([]);
  });

  it("derives an id as the first 32 hex digits of SHA-256(definition id NUL path), as stored ids were", () => {
    // printf '0123456789abcdef0123456789abcdef\0skills[0].tags[0]' | sha256sum | cut -c1-32
    expect(derivedId(fixedId, "skills[0].tags[0]")).toBe("323e1297035ec85b9dd3bddc49c7d071");
  });

  it("replaces read-only members a client sent with the registry's own, and leaves the input alone", async () => {
    const incoming = example();
    incoming.provider!.descriptor = "Spoofed";
    incoming.provider!.href = "https://evil.example.com";
    incoming.skills[0]!.tags[0]!.id = "client-chosen";
    incoming.referenceId = "Agent_ID=forged";
    const def = await withDerivedFields(incoming, fixedId, "Agent_ID=T-1");
    expect(def.provider).toMatchObject({ descriptor: "MyOrg", href: "" });
    expect(def.skills[0]!.tags[0]!.id).toBe(await derivedId(fixedId, "skills[0].tags[0]"));
    expect(def.referenceId).toBe("Agent_ID=T-1");
    expect(incoming.id).toBe("");
  });
});

describe("ids, keys and descriptors", () => {
  it("makes 32 lowercase hex ids, different each time", () => {
    const ids = new Set(Array.from({ length: 100 }, newDefinitionId));
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{32}$/);
  });

  it("tells a version id from an agent reference", () => {
    expect([fixedId, "Agent_ID=AGENT-7", "abc", "Agent_ID=", fixedId.toUpperCase()].map(idForm)).toEqual([
      "instance",
      "reference",
      "other",
      "other",
      "other",
    ]);
  });

  it("keys on name, provider id and version", () => {
    expect(upsertKey(example())).toEqual({
      name: "Customer Service Intelligence Agent",
      providerId: "Provider=MyOrg",
      version: "1.0.0",
    });
  });

  it("shows the value of a key=value reference as its descriptor", () => {
    expect(descriptorOf("Provider=MyOrg")).toBe("MyOrg");
    expect(descriptorOf(fixedId)).toBe(fixedId);
  });
});

describe("A161", () => {
  const host = { providerId: "Provider=HOST", platformId: "Platform=HOST" };
  const withIds = (provider: string, platform: string) => {
    const def = example();
    def.provider!.id = provider;
    def.platform!.id = platform;
    return def;
  };

  it("refuses the host platform for a third-party provider, on platform.id", () => {
    expect(hostPlatformIssues(withIds("Provider=MyOrg", "Platform=HOST"), host).map((i) => [i.code, i.path])).toEqual([
      ["A161", "platform.id"],
    ]);
  });

  it("allows the host platform for the host's own agents, and any other platform for anyone", () => {
    expect(hostPlatformIssues(withIds("Provider=HOST", "Platform=HOST"), host)).toEqual([]);
    expect(hostPlatformIssues(withIds("Provider=MyOrg", "Platform=OTHER"), host)).toEqual([]);
  });
});
