/**
 * A watch's batch of SSE events (sseBatch, src/transport/watch-events.ts) is one array of bytes, made once for
 * every watcher handed the same event objects (the watch service makes one for each change, for all its
 * watchers) and made anew for a watcher handed others (a filter that passes some of them), whatever the order in
 * which the watchers ask.
 */
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import type { StoredDefinition } from "../../src/domain/records.js";
import type { WatchEvent } from "../../src/domain/watch.js";
import { encodeDefinition } from "../../src/storage/rows.js";
import { sseBatch } from "../../src/transport/watch-events.js";

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

  it("is one array, the same for every watcher handed the same events", () => {
    const first = sseBatch(batchOf(0, 1, 2));
    const second = sseBatch(batchOf(0, 1, 2));
    expect(first).toHaveLength(1);
    expect(second[0]).toBe(first[0]);
    expect(eventsIn(first)).toEqual([
      { id: "11", event: "MODIFIED", name: "Agent 1" },
      { id: "12", event: "MODIFIED", name: "Agent 2" },
      { id: "13", event: "MODIFIED", name: "Agent 3" },
    ]);
  });

  it("is right for events that are not the ones it was made for, though alike", () => {
    const made = sseBatch(batchOf(0, 1, 2));
    const alike = sseBatch(batchOf(0, 1, 2).map((event) => ({ ...event })));
    expect(eventsIn(alike)).toEqual(eventsIn(made));
    const firstShared = sseBatch([changes[0] as WatchEvent, { ...(changes[1] as WatchEvent), revision: 99 }]);
    expect(eventsIn(firstShared).map((e) => e.id)).toEqual(["11", "99"]);
  });

  it("is made anew for a watcher handed some of them, and right again for the others after it", () => {
    const all = sseBatch(batchOf(0, 1, 2));
    const filtered = sseBatch(batchOf(0, 2));
    expect(filtered[0]).not.toBe(all[0]);
    expect(eventsIn(filtered).map((e) => e.id)).toEqual(["11", "13"]);
    const shorter = sseBatch(batchOf(0, 1));
    expect(eventsIn(shorter).map((e) => e.id)).toEqual(["11", "12"]);
    expect(eventsIn(sseBatch(batchOf(0, 1, 2))).map((e) => e.id)).toEqual(["11", "12", "13"]);
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
