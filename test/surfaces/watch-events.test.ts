/**
 * A watch's batch of SSE events (sseBatch, src/surfaces/encoding/watch-events.ts) is one array of bytes once a second
 * watcher is handed the same event objects (the watch service makes one for each change, for all its watchers),
 * the same array for every watcher after; a batch no other watcher has had (a filter passes some of the events)
 * goes as each event's bytes, not copied; whatever the order in which the watchers ask, each gets its events.
 */
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import type { StoredDefinition } from "../../src/domain/records.js";
import type { WatchEvent } from "../../src/domain/watch.js";
import { encodeDefinition } from "../../src/storage/rows.js";
import { sseBatch } from "../../src/surfaces/encoding/watch-events.js";

function stored(n: number): StoredDefinition {
  const definition = create(AgentDefinitionSchema, {
    id: n.toString(16).padStart(32, "0"),
    name: `Agent ${n}`,
    description: "d",
    url: "https://example.com",
    version: "1",
    provider: { id: "Acme" },
  });
  const { json, binary } = encodeDefinition(definition);
  const at = new Date("2026-12-06T00:00:00.000Z");
  return {
    id: definition.id,
    tenant: "default",
    agent: { number: n, referenceId: "" },
    json,
    binary,
    createdAt: at,
    updatedAt: at,
    statusChangedAt: at,
    revision: 1,
    modRevision: 10 + n,
    status: "ACTIVE",
    statusMessage: null,
    latest: true,
  };
}

/** What a watcher's stream carries for a batch: each event's id, type and definition name, in order. */
function eventsIn(bytes: readonly Uint8Array[]): { id: string; event: string; name?: string }[] {
  const text = bytes.map((b) => Buffer.from(b).toString("utf8")).join("");
  expect(text.endsWith("\n\n")).toBe(true);
  return text
    .slice(0, -2)
    .split("\n\n")
    .map((block) => {
      const lines = new Map(
        block.split("\n").map((line) => [line.slice(0, line.indexOf(": ")), line.slice(line.indexOf(": ") + 2)]),
      );
      const data = JSON.parse(lines.get("data") ?? "{}") as { revision: number; definition?: { name: string } };
      expect(String(data.revision)).toBe(lines.get("id"));
      return { id: lines.get("id") ?? "", event: lines.get("event") ?? "", name: data.definition?.name };
    });
}

describe("a watch's batch of SSE events", () => {
  const records = [1, 2, 3].map(stored);
  /** Each change's event, one object for every watcher (as the watch service makes them). */
  const changes: WatchEvent[] = records.map((record, i) => ({ type: "MODIFIED", revision: 11 + i, stored: record }));
  /** A watcher's batch (an array of its own) of the changes at these indexes. */
  const batchOf = (...indexes: number[]): WatchEvent[] => indexes.map((i) => changes[i] as WatchEvent);

  it("is one array once a second watcher is handed the same events, the same array for every one after", () => {
    const first = sseBatch(batchOf(0, 1, 2));
    const second = sseBatch(batchOf(0, 1, 2));
    const third = sseBatch(batchOf(0, 1, 2));
    // The first watcher's batch goes as each event's bytes: no other watcher may have it.
    expect(first).toHaveLength(3);
    expect(second).toHaveLength(1);
    expect(third[0]).toBe(second[0]);
    const expected = [
      { id: "11", event: "MODIFIED", name: "Agent 1" },
      { id: "12", event: "MODIFIED", name: "Agent 2" },
      { id: "13", event: "MODIFIED", name: "Agent 3" },
    ];
    expect(eventsIn(first)).toEqual(expected);
    expect(eventsIn(second)).toEqual(expected);
  });

  it("is right for events that are not the ones it was made for, though alike", () => {
    const made = sseBatch(batchOf(0, 1, 2));
    const alike = sseBatch(batchOf(0, 1, 2).map((event) => ({ ...event })));
    expect(eventsIn(alike)).toEqual(eventsIn(made));
    const firstShared = sseBatch([changes[0] as WatchEvent, { ...(changes[1] as WatchEvent), revision: 99 }]);
    expect(eventsIn(firstShared).map((e) => e.id)).toEqual(["11", "99"]);
    // Joined for two watchers, then a batch of as many events with the same first and last but another between.
    sseBatch(batchOf(0, 1, 2));
    sseBatch(batchOf(0, 1, 2));
    const between = [changes[0], { ...(changes[1] as WatchEvent), revision: 98 }, changes[2]] as WatchEvent[];
    expect(eventsIn(sseBatch(between)).map((e) => e.id)).toEqual(["11", "98", "13"]);
  });

  it("is no copy for a batch of one watcher's own, and right again for the others after it", () => {
    sseBatch(batchOf(0, 1, 2));
    const joined = sseBatch(batchOf(0, 1, 2));
    const filtered = sseBatch(batchOf(0, 2));
    expect(filtered).toHaveLength(2);
    expect(eventsIn(filtered).map((e) => e.id)).toEqual(["11", "13"]);
    const shorter = sseBatch(batchOf(0, 1));
    expect(eventsIn(shorter).map((e) => e.id)).toEqual(["11", "12"]);
    const again = [sseBatch(batchOf(0, 1, 2)), sseBatch(batchOf(0, 1, 2))];
    for (const chunks of again) expect(eventsIn(chunks).map((e) => e.id)).toEqual(["11", "12", "13"]);
    expect(again[1]).toHaveLength(1);
    expect(again[1]?.[0]).not.toBe(joined[0]);
  });

  it("is each event's own bytes when longer than a poll's worth (64 events)", () => {
    const many = Array.from(
      { length: 65 },
      (_, i): WatchEvent => ({ ...(changes[i % 3] as WatchEvent), revision: 100 + i }),
    );
    for (let watcher = 0; watcher < 2; watcher++) {
      const parts = sseBatch(many);
      expect(parts).toHaveLength(65);
      expect(eventsIn(parts).map((e) => e.id)).toEqual(many.map((e) => String(e.revision)));
    }
    sseBatch(many.slice(0, 64));
    expect(sseBatch(many.slice(0, 64))).toHaveLength(1);
  });

  it("carries a BOOKMARK among changes, and one event or none as it is", () => {
    const withBookmark = sseBatch([...batchOf(0, 1), { type: "BOOKMARK", revision: 12 }]);
    expect(eventsIn(withBookmark)).toEqual([
      { id: "11", event: "MODIFIED", name: "Agent 1" },
      { id: "12", event: "MODIFIED", name: "Agent 2" },
      { id: "12", event: "BOOKMARK", name: undefined },
    ]);
    expect(eventsIn(sseBatch(batchOf(2)))).toEqual([{ id: "13", event: "MODIFIED", name: "Agent 3" }]);
    expect(sseBatch([])).toEqual([]);
  });
});
