/**
 * What one probe makes of a version's liveness (src/domain/liveness.ts): UP at the first card, DOWN after
 * PROBE_DOWN_AFTER failures in a row, and a new `meta.liveness` only when `state` or `drift` changes.
 */
import { describe, expect, it } from "vitest";
import {
  judgeProbe,
  type LivenessNow,
  livenessFiltersOf,
  livenessOf,
  NEVER_PROBED,
  type ProbeResult,
} from "../../src/domain/liveness.js";

const REGISTERED = {
  name: "Recipe Agent",
  version: "1.0.0",
  supportedInterfaces: [{ url: "https://h.example/a2a", protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
  skills: [{ id: "find", name: "Find" }],
};
const AT = new Date("2026-12-07T23:00:00.000Z");
const found = (card: Record<string, unknown> = REGISTERED): ProbeResult => ({
  ok: true,
  card,
  status: 200,
  latencyMs: 12,
});
const failed = (kind = "REFUSED"): ProbeResult => ({ ok: false, kind, latencyMs: 3 });
const judged = (now: LivenessNow, result: ProbeResult) => judgeProbe(now, result, REGISTERED, 2, AT);
const parsed = (json: string | undefined) => (json === undefined ? undefined : JSON.parse(json));

describe("a probe's verdict", () => {
  it("makes a never-probed version UP at its first card, with its drift, and the old values", () => {
    const verdict = judged(NEVER_PROBED, found());
    expect(verdict.failures).toBe(0);
    expect(verdict.published).toMatchObject({ state: "UP", drift: "NONE" });
    expect(parsed(verdict.published?.json)).toEqual({
      state: "UP",
      checkedAt: "2026-12-07T23:00:00.000Z",
      latencyMs: 12,
      httpStatus: 200,
      drift: "NONE",
      previousState: "NOT_PROBED",
    });
  });

  it("publishes nothing when the state and the drift stay, and a change of drift alone", () => {
    const up: LivenessNow = { state: "UP", drift: "NONE", json: "{}", failures: 0 };
    expect(judged(up, found()).published).toBeUndefined();
    const breaking = judged(up, found({ ...REGISTERED, skills: [] }));
    expect(breaking.published).toMatchObject({ state: "UP", drift: "BREAKING" });
    expect(parsed(breaking.published?.json)).toMatchObject({
      driftPaths: [{ path: "skills[id=find]", kind: "BREAKING" }],
      previousState: "UP",
      previousDrift: "NONE",
    });
  });

  it("counts failures in a row, DOWN at the second, keeping the drift and its paths, then nothing more", () => {
    const up: LivenessNow = {
      state: "UP",
      drift: "COMPATIBLE",
      json: '{"state":"UP","drift":"COMPATIBLE","driftPaths":[{"path":"name","kind":"COMPATIBLE"}]}',
      failures: 0,
    };
    const first = judged(up, failed());
    expect(first).toEqual({ published: undefined, failures: 1 });
    const second = judged({ ...up, failures: 1 }, failed("TIMEOUT"));
    expect(second.failures).toBe(2);
    expect(parsed(second.published?.json)).toEqual({
      state: "DOWN",
      checkedAt: "2026-12-07T23:00:00.000Z",
      latencyMs: 3,
      failure: "TIMEOUT",
      consecutiveFailures: 2,
      drift: "COMPATIBLE",
      driftPaths: [{ path: "name", kind: "COMPATIBLE" }],
      previousState: "UP",
      previousDrift: "COMPATIBLE",
    });
    const down: LivenessNow = { state: "DOWN", drift: "COMPATIBLE", json: second.published!.json, failures: 2 };
    expect(judged(down, failed())).toEqual({ published: undefined, failures: 3 });
    // Back UP at the first card.
    expect(judged(down, found()).published).toMatchObject({ state: "UP", drift: "NONE" });
  });

  it("keeps a never-probed version NOT_PROBED until it is decided either way", () => {
    expect(judged(NEVER_PROBED, failed())).toEqual({ published: undefined, failures: 1 });
    expect(judged({ ...NEVER_PROBED, failures: 1 }, failed()).published?.state).toBe("DOWN");
  });

  it("caps the drift paths at 100", () => {
    const many = { ...REGISTERED, skills: Array.from({ length: 150 }, (_, i) => ({ id: `s${i}` })) };
    const verdict = judgeProbe(NEVER_PROBED, found(), many, 2, AT);
    expect(parsed(verdict.published?.json).driftPaths).toHaveLength(100);
  });
});

describe("liveness as read and filtered", () => {
  it("reads a stored liveness's state and drift, NOT_PROBED without one", () => {
    expect(livenessOf(null)).toEqual({ state: "NOT_PROBED", drift: null });
    expect(livenessOf('{"state":"DOWN"}')).toEqual({ state: "DOWN", drift: null });
    expect(livenessOf('{"state":"UP","drift":"BREAKING"}')).toEqual({ state: "UP", drift: "BREAKING" });
  });

  it("takes the filters' known values in order, and none when none is asked", () => {
    expect(livenessFiltersOf({ liveness: ["DOWN", "UP"], drift: [] })).toEqual({ liveness: ["UP", "DOWN"] });
    expect(livenessFiltersOf({ drift: ["BREAKING"] })).toEqual({ drift: ["BREAKING"] });
    expect(livenessFiltersOf({})).toEqual({});
  });
});
