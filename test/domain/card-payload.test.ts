import { canonicalizeAgentCard } from "@a2a-js/sdk";
import { fromJson } from "@bufbuild/protobuf";
import { importJWK } from "jose";
import { describe, expect, it } from "vitest";
import { AgentCardSchema } from "../../gen/asor/v1/agent_card_pb.js";
import { agentCardJsonPayload, agentCardPayload, jcs } from "../../src/domain/card-payload.js";
import { signPayload } from "../../src/service/card-signer.js";

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

/**
 * A reproducible test vector (Ed25519 signatures are deterministic), checked with a2a-js's verification and Node's
 * crypto: a card, its canonical payload, the RFC 8037 A.1 test key (test only) and the signature it makes.
 */
const VECTOR_CARD = {
  name: "Recipe Agent",
  description: "Finds recipes",
  version: "1.0.0",
  supportedInterfaces: [
    { url: "https://agents.example.com/recipe/a2a", protocolBinding: "JSONRPC", protocolVersion: "1.0" },
  ],
  capabilities: { streaming: true },
  defaultInputModes: ["text/plain"],
  defaultOutputModes: ["text/plain"],
  skills: [{ id: "find", name: "Find", description: "Find a recipe", tags: ["cooking"] }],
};
const VECTOR_PAYLOAD =
  '{"capabilities":{"streaming":true},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],' +
  '"description":"Finds recipes","name":"Recipe Agent","skills":[{"description":"Find a recipe","id":"find",' +
  '"name":"Find","tags":["cooking"]}],"supportedInterfaces":[{"protocolBinding":"JSONRPC","protocolVersion":"1.0",' +
  '"url":"https://agents.example.com/recipe/a2a"}],"version":"1.0.0"}';
const RFC8037_A1 = {
  kty: "OKP",
  crv: "Ed25519",
  x: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
  d: "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A",
};
const VECTOR_SIGNATURE = {
  protected: "eyJhbGciOiJFZERTQSIsInR5cCI6IkpPU0UiLCJraWQiOiJyZmM4MDM3LWExIn0",
  signature: "Nyz2620XPmdU_e3OtcdR5u6OC0YEfGpELLWWW_wrGmP1f640aHBpyQsUKdTB0na26yhq0r7QyTjShWx9v_RnDQ",
};

describe("the bytes a card's signature signs (A2A v1.0 §8.4.1)", () => {
  it("are the test vector's canonical payload, whatever the order of the members or a signature present", () => {
    expect(text(agentCardJsonPayload(VECTOR_CARD))).toBe(VECTOR_PAYLOAD);
    const reordered = Object.fromEntries(Object.entries(VECTOR_CARD).reverse());
    expect(text(agentCardJsonPayload({ ...reordered, signatures: [VECTOR_SIGNATURE] }))).toBe(VECTOR_PAYLOAD);
  });

  it("sign to the test vector's exact Ed25519 signature", async () => {
    const key = await importJWK(RFC8037_A1, "EdDSA");
    const header = { alg: "EdDSA", typ: "JOSE", kid: "rfc8037-a1" } as const;
    expect(await signPayload(key as CryptoKey, header, agentCardJsonPayload(VECTOR_CARD))).toEqual(VECTOR_SIGNATURE);
  });

  it("keep REQUIRED members at their default and set optional ones, drop other defaults (the spec's example)", () => {
    const card = fromJson(AgentCardSchema, {
      name: "Example Agent",
      description: "",
      capabilities: { streaming: false, pushNotifications: false },
      skills: [],
    });
    // §8.4.1's own output, plus the REQUIRED members its example leaves out (at their defaults).
    expect(JSON.parse(text(agentCardPayload(card)))).toEqual({
      capabilities: { pushNotifications: false, streaming: false },
      defaultInputModes: [],
      defaultOutputModes: [],
      description: "",
      name: "Example Agent",
      skills: [],
      supportedInterfaces: [],
      version: "",
    });
  });

  it("keep a skill's empty tags, where @a2a-js/sdk's canonicalization drops them (the documented difference)", () => {
    const card = { ...VECTOR_CARD, skills: [{ id: "find", name: "Find", description: "Find a recipe", tags: [] }] };
    expect(text(agentCardJsonPayload(card))).toContain('"tags":[]');
    expect(canonicalizeAgentCard(card as never)).not.toContain('"tags"');
    // Where nothing REQUIRED is empty, both give the same bytes.
    expect(canonicalizeAgentCard(VECTOR_CARD as never)).toBe(VECTOR_PAYLOAD);
  });

  it("refuse a member the card's proto does not have: a signature cannot vouch for it", () => {
    expect(() => agentCardJsonPayload({ ...VECTOR_CARD, extra: 1 })).toThrow(/extra/);
  });

  it("are JCS: keys by UTF-16 code units, literal UTF-8, ES numbers", () => {
    expect(jcs({ "\u20ac": 1, "\r": 2, a: [1e21, 0.1, "é"] })).toBe('{"\\r":2,"a":[1e+21,0.1,"é"],"€":1}');
  });
});
