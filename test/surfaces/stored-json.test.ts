import { toJsonString } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import {
  ListAgentDefinitionsResponseSchema,
  SetAgentDefinitionStatusResponseSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { createStoredJson } from "../../src/surfaces/encoding/stored-json.js";

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (data: Uint8Array) => new TextDecoder().decode(data);

describe("stored JSON answers through Connect's JSON codec", () => {
  // What Connect's JSON serialization does with an answer: toJsonString, then the encoder.
  const written = (
    storedJson: ReturnType<typeof createStoredJson>,
    schema: Parameters<typeof toJsonString>[0],
    message: Parameters<typeof toJsonString>[1],
  ) => storedJson.textEncoder.encode(toJsonString(schema, message));

  it.each([
    ["a definition", AgentDefinitionSchema],
    ["a page (its own string field carries the key)", ListAgentDefinitionsResponseSchema],
    ["a status change (the key rides in its one item)", SetAgentDefinitionStatusResponseSchema],
  ] as const)("writes the stored bytes for a stand-in of %s, once", (_, schema) => {
    const storedJson = createStoredJson();
    const json = bytes('{"total":1,"data":[{"id":"x"}]}');
    const standIn = storedJson.standIn(schema, json, new AbortController().signal);
    expect(text(written(storedJson, schema, standIn as never))).toBe(text(json));
    // Written once: the same stand-in again is a bug, not a second copy.
    expect(() => written(storedJson, schema, standIn as never)).toThrow(/No stored JSON/);
  });

  it("encodes every other text as UTF-8, also one that names a key without the process's nonce", () => {
    const storedJson = createStoredJson();
    storedJson.standIn(AgentDefinitionSchema, bytes("{}"), new AbortController().signal);
    for (const other of [
      '{"id":"~stored-json~0"}',
      '{"id":"~stored-json~0000000000000000~0"}',
      '{"code":"not_found","message":"\u{1F916}"}',
    ]) {
      expect(text(storedJson.textEncoder.encode(other))).toBe(other);
    }
  });

  it("drops the bytes of a call that ends before they are written", () => {
    const storedJson = createStoredJson();
    const call = new AbortController();
    const standIn = storedJson.standIn(AgentDefinitionSchema, bytes('{"id":"a"}'), call.signal);
    call.abort();
    expect(() => written(storedJson, AgentDefinitionSchema, standIn)).toThrow(/No stored JSON/);
  });
});
