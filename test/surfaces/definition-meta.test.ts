import { create, fromBinary, fromJson, toBinary, toJson, toJsonString } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import {
  AgentDefinitionSchema,
  CardDrift,
  LivenessSchema,
  LivenessState,
  ProbeFailure,
  RegistryMetaSchema,
} from "../../gen/asor/v1/agent_definition_pb.js";
import { ListAgentDefinitionsResponseSchema } from "../../gen/asor/v1/agent_definition_service_pb.js";
import type { StoredDefinition } from "../../src/domain/records.js";
import { encodeDefinition } from "../../src/storage/rows.js";
import {
  definitionWithMeta,
  jsonWithMeta,
  metaBinary,
  metaJson,
  metaMessage,
  pageJson,
  storedDefinitionBinary,
} from "../../src/surfaces/encoding/definition-meta.js";

/** A probed version's `meta.liveness`, as the prober stores it (protobuf-es's JSON). */
const PROBED = toJsonString(
  LivenessSchema,
  create(LivenessSchema, {
    state: LivenessState.UP,
    checkedAt: "2026-12-07T23:00:00.000Z",
    latencyMs: 12,
    httpStatus: 200,
    drift: CardDrift.BREAKING,
    driftPaths: Array.from({ length: 9 }, (_, i) => ({ path: `skills[id=skill-${i}]`, kind: CardDrift.BREAKING })),
    previousState: LivenessState.NOT_PROBED,
  }),
);
const PROBED_DOWN = toJsonString(
  LivenessSchema,
  create(LivenessSchema, {
    state: LivenessState.DOWN,
    checkedAt: "2026-12-07T23:05:00.000Z",
    latencyMs: 5000,
    failure: ProbeFailure.TIMEOUT,
    consecutiveFailures: 2,
    previousState: LivenessState.UP,
    previousDrift: CardDrift.NONE,
    drift: CardDrift.NONE,
  }),
);

function stored(overrides: Partial<StoredDefinition> = {}): StoredDefinition {
  const definition = create(AgentDefinitionSchema, {
    id: "0123456789abcdef0123456789abcdef",
    name: 'Meta \u{1F916} "quoted"',
    description: "d",
    url: "https://example.com",
    version: "1",
    provider: { id: "Provider=Acme" },
    referenceId: "Agent_ID=AGENT-1",
    // What a client sent as meta is never stored.
    meta: { revision: 42, statusMessage: "sent by a client" },
  });
  const { json, binary } = encodeDefinition(definition);
  return {
    id: definition.id,
    tenant: "default",
    agent: { number: 1, referenceId: "Agent_ID=AGENT-1" },
    json,
    binary,
    createdAt: new Date("2024-01-02T03:04:05.678Z"),
    updatedAt: new Date("2024-02-03T04:05:06.007Z"),
    statusChangedAt: new Date("2024-01-02T03:04:05.678Z"),
    revision: 3,
    // Past 32 bits: meta's int64 is written as one varint, and as a string in JSON.
    modRevision: 2 ** 40 + 5,
    status: "DEPRECATED",
    statusMessage: 'Use "v2"\n\u{1F680}',
    latest: false,
    ...overrides,
  };
}

describe("meta in answers", () => {
  it("writes the JSON protobuf-es writes for the same meta", () => {
    for (const s of [
      stored(),
      stored({ statusMessage: null, latest: true, status: "ACTIVE" }),
      stored({ liveness: PROBED }),
      stored({ liveness: PROBED_DOWN }),
    ]) {
      expect(metaJson(s)).toBe(toJsonString(RegistryMetaSchema, metaMessage(s)));
    }
  });

  it("writes the binary protobuf-es writes for the same meta, and a stored answer as toBinary writes it", () => {
    const variants = [
      stored(),
      stored({ statusMessage: null, latest: true, status: "ACTIVE" }),
      stored({ statusMessage: "", revision: 0, status: "DEACTIVATED" }),
      stored({ revision: 2 ** 31 - 1 }),
      // A long message (its length and meta's take two bytes), in 4-byte UTF-8.
      stored({ statusMessage: "\u{1F680}".repeat(100) }),
      // ASCII past 127 bytes (a two-byte length), and ASCII that turns non-ASCII at its end.
      stored({ statusMessage: "a".repeat(127) }),
      stored({ statusMessage: "a".repeat(128) }),
      stored({ statusMessage: `${"a".repeat(126)}\u00e9` }),
      // Instants written digit by digit: the first and last of a 4-digit year, and years toISOString extends.
      stored({ createdAt: new Date("0000-01-01T00:00:00.000Z"), updatedAt: new Date("9999-12-31T23:59:59.999Z") }),
      stored({
        createdAt: new Date(Date.UTC(10000, 0, 1)),
        statusChangedAt: new Date(Date.UTC(-1, 5, 30, 1, 2, 3, 4)),
      }),
      // A probed version's liveness (issue 44), its drift paths past 127 bytes.
      stored({ liveness: PROBED }),
      stored({ liveness: PROBED_DOWN }),
    ];
    for (const s of variants) {
      expect(metaBinary(s)).toEqual(toBinary(RegistryMetaSchema, metaMessage(s)));
      // The answer as the lean paths write it (the stored bytes, meta first) is the message's own encoding.
      const answer = definitionWithMeta(s);
      expect(storedDefinitionBinary(s)).toEqual(toBinary(AgentDefinitionSchema, answer));
      expect(storedDefinitionBinary(s, 5).subarray(5)).toEqual(toBinary(AgentDefinitionSchema, answer));
    }
  });

  it("splices meta into the stored JSON as its last member, with the ETag and millisecond instants", () => {
    const s = stored();
    const answer = JSON.parse(new TextDecoder().decode(jsonWithMeta(s)));
    expect(answer.name).toBe('Meta \u{1F916} "quoted"');
    expect(Object.keys(answer).at(-1)).toBe("meta");
    expect(answer.meta).toEqual({
      createdAt: "2024-01-02T03:04:05.678Z",
      updatedAt: "2024-02-03T04:05:06.007Z",
      statusChangedAt: "2024-01-02T03:04:05.678Z",
      revision: 3,
      status: "DEPRECATED",
      statusMessage: 'Use "v2"\n\u{1F680}',
      latest: false,
      etag: `"${s.id}-3"`,
      modRevision: "1099511627781",
      liveness: { state: "NOT_PROBED" },
    });
  });

  it("sets meta beside the stored binary, which encodes to the definition with the registry's meta only", () => {
    const s = stored({ statusMessage: null });
    const decoded = fromBinary(AgentDefinitionSchema, toBinary(AgentDefinitionSchema, definitionWithMeta(s)));
    expect(decoded.name).toBe('Meta \u{1F916} "quoted"');
    expect(decoded.meta).toEqual(metaMessage(s));
    expect(decoded.meta?.statusMessage).toBeUndefined();
    expect(toJson(RegistryMetaSchema, decoded.meta!)).toEqual({
      createdAt: "2024-01-02T03:04:05.678Z",
      updatedAt: "2024-02-03T04:05:06.007Z",
      statusChangedAt: "2024-01-02T03:04:05.678Z",
      revision: 3,
      status: "DEPRECATED",
      latest: false,
      etag: `"${s.id}-3"`,
      modRevision: "1099511627781",
      liveness: { state: "NOT_PROBED" },
    });
  });

  it("writes a page's JSON from the stored bytes as the protobuf JSON of its response message", () => {
    const items = [stored({ statusMessage: null }), stored({})];
    const json = JSON.parse(new TextDecoder().decode(pageJson(7, items, "tok_en-1", 2 ** 40 + 9)));
    const message = create(ListAgentDefinitionsResponseSchema, {
      total: 7,
      data: items.map((s) => ({ ...fromBinary(AgentDefinitionSchema, s.binary), meta: metaMessage(s) })),
      nextPageToken: "tok_en-1",
      revision: BigInt(2 ** 40 + 9),
    });
    // Every member protobuf-es writes, and the stored lists it leaves out when empty (`"skills": []`): any
    // protobuf JSON parser reads them back.
    expect(json).toMatchObject(toJson(ListAgentDefinitionsResponseSchema, message) as object);
    expect(json.data[0].skills).toEqual([]);
    expect(json.revision).toBe("1099511627785");
    expect(fromJson(ListAgentDefinitionsResponseSchema, json)).toEqual(message);
  });

  it("writes a list's revision even when it is 0, and a page without one (a status change's) without it", () => {
    const decode = (bytes: Uint8Array) => JSON.parse(new TextDecoder().decode(bytes));
    expect(decode(pageJson(0, [], undefined, 0))).toEqual({ total: 0, data: [], revision: "0" });
    expect(decode(pageJson(0, [], "t", 5))).toEqual({ total: 0, data: [], nextPageToken: "t", revision: "5" });
    expect(decode(pageJson(0, []))).toEqual({ total: 0, data: [] });
  });
});
