import { fromJson } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { agentCardJson, renderAgentCard } from "../../src/domain/agent-card.js";
import { cardDrift } from "../../src/domain/card-drift.js";
import { withDerivedFields } from "../../src/domain/derived-fields.js";
import { minimalDefinition } from "../support/definitions.js";

const URL = "https://agents.example.com/recipe/a2a";

/** A registered card as the registry renders it, and an identical live card to vary. */
const registered = (): Record<string, unknown> => ({
  name: "Recipe Agent",
  description: "Finds recipes",
  version: "1.0.0",
  supportedInterfaces: [{ url: URL, protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
  capabilities: { streaming: true },
  defaultInputModes: ["text/plain"],
  defaultOutputModes: ["text/plain"],
  skills: [
    { id: "find", name: "Find", description: "Find a recipe", tags: ["cooking"] },
    { id: "plan", name: "Plan", description: "Plan a week", tags: ["cooking", "planning"] },
  ],
});
const live = (change: (card: Record<string, unknown>) => void = () => {}) => {
  const card = structuredClone(registered());
  change(card);
  return card;
};
const skills = (card: Record<string, unknown>) => card.skills as Record<string, unknown>[];
const interfaces = (card: Record<string, unknown>) => card.supportedInterfaces as Record<string, unknown>[];

describe("drift of a live card from the registered one", () => {
  it("is NONE for the same card, whatever the order of members, signatures and empty lists", () => {
    const reordered = Object.fromEntries(Object.entries(live()).reverse());
    reordered.signatures = [{ protected: "e30", signature: "AA" }];
    reordered.securitySchemes = {};
    (reordered.skills as Record<string, unknown>[])[0] = { tags: ["cooking"], examples: [], ...skills(live())[0] };
    expect(cardDrift(registered(), reordered)).toEqual({ drift: "NONE", differences: [] });
  });

  it.each([
    ["a registered skill missing", (c: Record<string, unknown>) => skills(c).splice(1, 1), "skills[id=plan]"],
    [
      "another protocol binding",
      (c: Record<string, unknown>) => (interfaces(c)[0]!.protocolBinding = "HTTP+JSON"),
      `supportedInterfaces[url=${URL}].protocolBinding`,
    ],
    [
      "another protocol version",
      (c: Record<string, unknown>) => (interfaces(c)[0]!.protocolVersion = "0.3"),
      `supportedInterfaces[url=${URL}].protocolVersion`,
    ],
    ["another version", (c: Record<string, unknown>) => (c.version = "1.1.0"), "version"],
    [
      "a registered capability no longer true",
      (c: Record<string, unknown>) => (c.capabilities = { streaming: false }),
      "capabilities.streaming",
    ],
  ])("is BREAKING for %s", (_what, change, path) => {
    expect(cardDrift(registered(), live(change))).toEqual({
      drift: "BREAKING",
      differences: [{ path, kind: "BREAKING" }],
    });
  });

  it("is BREAKING for another interface URL, the new one COMPATIBLE", () => {
    expect(
      cardDrift(
        registered(),
        live((c) => (interfaces(c)[0]!.url = `${URL}/v2`)),
      ),
    ).toEqual({
      drift: "BREAKING",
      differences: [
        { path: `supportedInterfaces[url=${URL}/v2]`, kind: "COMPATIBLE" },
        { path: `supportedInterfaces[url=${URL}]`, kind: "BREAKING" },
      ],
    });
  });

  it("is BREAKING for a changed security scheme when the registered card declares them", () => {
    const scheme = { httpAuthSecurityScheme: { scheme: "Bearer" } };
    const mine = { ...registered(), securitySchemes: { bearer: scheme } };
    const theirs = { ...live(), securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: "Basic" } } } };
    expect(cardDrift(mine, theirs)).toEqual({
      drift: "BREAKING",
      differences: [{ path: "securitySchemes", kind: "BREAKING" }],
    });
    expect(cardDrift(mine, { ...live(), securitySchemes: { bearer: scheme } }).drift).toBe("NONE");
  });

  it.each([
    [
      "an added skill",
      (c: Record<string, unknown>) => skills(c).push({ id: "cook", name: "Cook", description: "x", tags: [] }),
      ["skills[id=cook]"],
    ],
    [
      "a changed skill description",
      (c: Record<string, unknown>) => (skills(c)[0]!.description = "Finds"),
      ["skills[id=find].description"],
    ],
    ["a changed skill name", (c: Record<string, unknown>) => (skills(c)[0]!.name = "Search"), ["skills[id=find].name"]],
    ["changed tags", (c: Record<string, unknown>) => (skills(c)[1]!.tags = ["planning"]), ["skills[id=plan].tags"]],
    [
      "a changed card name and description",
      (c: Record<string, unknown>) => Object.assign(c, { name: "R", description: "D" }),
      ["description", "name"],
    ],
    [
      "an added interface",
      (c: Record<string, unknown>) =>
        interfaces(c).push({ url: `${URL}/grpc`, protocolBinding: "GRPC", protocolVersion: "1.0" }),
      [`supportedInterfaces[url=${URL}/grpc]`],
    ],
    [
      "a capability added",
      (c: Record<string, unknown>) => (c.capabilities = { streaming: true, pushNotifications: true }),
      ["capabilities.pushNotifications"],
    ],
    [
      "security the registered card cannot carry",
      (c: Record<string, unknown>) => (c.securitySchemes = { k: { apiKeySecurityScheme: { name: "k" } } }),
      ["securitySchemes"],
    ],
    ["a member outside A2A v1.0", (c: Record<string, unknown>) => (c.homepage = "https://x.example"), ["homepage"]],
  ])("is COMPATIBLE for %s", (_what, change, paths) => {
    expect(cardDrift(registered(), live(change))).toEqual({
      drift: "COMPATIBLE",
      differences: paths.map((path) => ({ path, kind: "COMPATIBLE" })),
    });
  });

  it("names every difference in path order, and BREAKING wins", () => {
    const drift = cardDrift(
      registered(),
      live((c) => {
        c.version = "2";
        skills(c)[0]!.description = "x";
      }),
    );
    expect(drift).toEqual({
      drift: "BREAKING",
      differences: [
        { path: "skills[id=find].description", kind: "COMPATIBLE" },
        { path: "version", kind: "BREAKING" },
      ],
    });
  });

  it("reads a v0.3 card's interfaces: the same URL and transport at 0.3 is a protocol version change", () => {
    const old: Record<string, unknown> = {
      ...live(),
      url: URL,
      preferredTransport: "JSONRPC",
      protocolVersion: "0.3.0",
    };
    delete old.supportedInterfaces;
    expect(cardDrift(registered(), old)).toEqual({
      drift: "BREAKING",
      differences: [{ path: `supportedInterfaces[url=${URL}].protocolVersion`, kind: "BREAKING" }],
    });
    const grpcOnly = { ...old, preferredTransport: "GRPC" };
    expect(cardDrift(registered(), grpcOnly).differences).toEqual([
      { path: `supportedInterfaces[url=${URL}].protocolBinding`, kind: "BREAKING" },
    ]);
  });

  it("finds no drift between the registry's own rendering of a definition and that card served back", () => {
    const json = minimalDefinition({ url: URL });
    const definition = withDerivedFields(
      fromJson(AgentDefinitionSchema, json as never),
      "0".repeat(32),
      "Agent_ID=T-1",
    );
    const card = agentCardJson(renderAgentCard(definition)) as Record<string, unknown>;
    expect(cardDrift(card, JSON.parse(JSON.stringify(card)))).toEqual({ drift: "NONE", differences: [] });
    const served = JSON.parse(JSON.stringify(card));
    served.skills = [];
    const ids = (card.skills as { id: string }[]).map((skill) => `skills[id=${skill.id}]`);
    expect(ids.length).toBeGreaterThan(0);
    expect(cardDrift(card, served).differences).toEqual(ids.sort().map((path) => ({ path, kind: "BREAKING" })));
  });
});
