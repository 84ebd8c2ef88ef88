import { fromJson, toBinary, toJson } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentCardSchema } from "../../gen/asor/v1/agent_card_pb.js";
import { type AgentDefinition, AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  AGENT_CARD_CACHE_CONTROL,
  agentCardEtag,
  agentCardJson,
  renderAgentCard,
} from "../../src/domain/agent-card.js";
import { withDerivedFields } from "../../src/domain/derived-fields.js";
import { a2aAgentCardValidator } from "../support/a2a-agent-card-schema.js";
import { exampleCard, fullCard, minimalCard } from "../support/agent-cards.js";
import { exampleDefinition, minimalDefinition } from "../support/definitions.js";
import { fullDefinition } from "../support/full-definition.js";

const ID = "0123456789abcdef0123456789abcdef";

/** A fixture as the registry stores it (derived members filled in), which is what the card is rendered from. */
function stored(json: Record<string, unknown>): AgentDefinition {
  return withDerivedFields(fromJson(AgentDefinitionSchema, json as never), ID, "Agent_ID=T-1");
}

const cardOf = (json: Record<string, unknown>) => agentCardJson(renderAgentCard(stored(json)));
const validate = a2aAgentCardValidator();

describe("the A2A agent card of a definition", () => {
  it("renders the spec's example member by member", () => {
    expect(cardOf(exampleDefinition())).toEqual(exampleCard());
  });

  it(
    "renders the definition with every member: icon, documentation, all three capabilities, a skill's own " + "modes",
    () => {
      expect(cardOf(fullDefinition("card"))).toEqual(fullCard("card"));
    },
  );

  it(
    "renders the minimal definition with A2A's required members: default modes text/plain, empty capabilities, " +
      "empty tags",
    () => {
      expect(cardOf(minimalDefinition())).toEqual(minimalCard());
    },
  );

  it.each([
    ["the spec's example", exampleDefinition()],
    ["the full definition", fullDefinition("schema")],
    ["the minimal definition", minimalDefinition()],
  ])("gives %s a card that is a valid A2A v1.0 AgentCard", (_, json) => {
    const card = cardOf(json);
    expect(validate(card), JSON.stringify(validate.errors)).toBe(true);
  });

  it(
    "needs agentCardJson's required lists: protobuf JSON alone leaves a skill without tags without its required " +
      "`tags`",
    () => {
      const plain = toJson(AgentCardSchema, renderAgentCard(stored(minimalDefinition())));
      expect(validate(plain)).toBe(false);
      expect(validate.errors?.map((e) => `${e.instancePath} ${e.message}`)).toEqual([
        "/skills/0 must have required property 'tags'",
      ]);
    },
  );

  it(
    "keeps the port of the agent's url in the provider's url, and takes the provider's href when the definition " +
      "has one",
    () => {
      expect(cardOf(minimalDefinition({ url: "http://127.0.0.1:9000/a2a" })).provider).toEqual({
        organization: "Acme",
        url: "http://127.0.0.1:9000",
      });
      const withHref = stored(minimalDefinition());
      if (withHref.provider) withHref.provider.href = "https://acme.example/about";
      expect(agentCardJson(renderAgentCard(withHref)).provider).toEqual({
        organization: "Acme",
        url: "https://acme.example/about",
      });
    },
  );

  it("names a provider with a 32-hex host id by that id, and uses a URN agent url itself as the provider's url", () => {
    const card = cardOf(
      minimalDefinition({ url: "urn:agents:minimal", provider: { id: "94a39e71541b468fa895955508287acd" } }),
    );
    expect(card.provider).toEqual({ organization: "94a39e71541b468fa895955508287acd", url: "urn:agents:minimal" });
    expect(card.supportedInterfaces).toEqual([
      { url: "urn:agents:minimal", protocolBinding: "JSONRPC", protocolVersion: "1.0" },
    ]);
  });

  it("leaves out capabilities the definition does not set, and keeps explicit false", () => {
    expect(cardOf(minimalDefinition({ capabilities: { pushNotifications: false } })).capabilities).toEqual({
      pushNotifications: false,
    });
    expect(cardOf(minimalDefinition({ supportsAuthenticatedExtendedCard: true })).capabilities).toEqual({
      extendedAgentCard: true,
    });
  });

  it("keeps the skills, their tags and modes in the definition's order", () => {
    const skills = [
      {
        id: "b",
        name: "B",
        description: "b",
        tags: [{ tag: "z" }, { tag: "a" }],
        outputModes: [{ type: "image/png" }, { type: "text/csv" }],
      },
      { id: "a", name: "A", description: "a", inputModes: [{ type: "audio/wav" }] },
    ];
    expect(cardOf(minimalDefinition({ skills })).skills).toEqual([
      { id: "b", name: "B", description: "b", tags: ["z", "a"], outputModes: ["image/png", "text/csv"] },
      { id: "a", name: "A", description: "a", tags: [], inputModes: ["audio/wav"] },
    ]);
  });

  it("uses A2A's field numbers, so an A2A client decodes the binary card", () => {
    // AgentCard.name = 1, supported_interfaces = 3 (url = 1), version = 5, skills = 12: tag bytes (number << 3 | 2).
    const bytes = toBinary(AgentCardSchema, renderAgentCard(stored(minimalDefinition())));
    expect(bytes[0]).toBe((1 << 3) | 2);
    const fields = new Set<number>();
    for (let i = 0; i < bytes.length; ) {
      const tag = bytes[i] as number;
      fields.add(tag >> 3);
      let length = 0;
      let shift = 0;
      let b: number;
      i++;
      do {
        b = bytes[i++] as number;
        length |= (b & 0x7f) << shift;
        shift += 7;
      } while (b & 0x80);
      i += length;
    }
    expect([...fields].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 7, 10, 11, 12]);
  });
});

describe("the agent card's caching", () => {
  it("has a strong ETag that changes with the revision and with the version's id", () => {
    const etag = agentCardEtag({ id: ID, revision: 1 });
    expect(etag).toMatch(/^"[!#-~]+"$/);
    expect(agentCardEtag({ id: ID, revision: 1 })).toBe(etag);
    expect(agentCardEtag({ id: ID, revision: 2 })).not.toBe(etag);
    expect(agentCardEtag({ id: "f".repeat(32), revision: 1 })).not.toBe(etag);
  });

  it("may be kept privately, but is revalidated with its ETag before each reuse (no max-age)", () => {
    expect(AGENT_CARD_CACHE_CONTROL).toBe("private, no-cache");
  });
});
