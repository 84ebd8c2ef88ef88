/**
 * Liveness (issue 44, item 2): what one probe of an agent makes of the version's `meta.liveness`. Pure.
 *
 * - A probe that found a card: UP, its failures in a row back to 0, and the drift of the live card from the
 *   registered one (card-drift.ts).
 * - A probe that found none: one more failure in a row; DOWN once there are `downAfter` of them, else the state
 *   stays what it was (NOT_PROBED stays NOT_PROBED until the agent is decided either way). The drift stays the
 *   one the last card found gave: a DOWN agent's card is not known to have changed.
 * - `meta.liveness` changes (is published, with a LIVENESS_CHANGED change) only when `state` or `drift` changes;
 *   its other members are then those of the probe that changed them. Otherwise only the failures in a row move,
 *   in the prober's schedule, which no reader sees.
 */
import { create, fromJsonString, toJsonString } from "@bufbuild/protobuf";
import {
  CardDrift,
  type DriftPath,
  type Liveness,
  LivenessSchema,
  LivenessState,
  ProbeFailure,
} from "../../gen/asor/v1/agent_definition_pb.js";
import { cardDrift, type DriftKind } from "./card-drift.js";

export type LivenessStateName = "UP" | "DOWN" | "NOT_PROBED";

/** Every liveness state and drift, as the list's and watch's filters name them. */
export const LIVENESS_STATES: readonly LivenessStateName[] = ["UP", "DOWN", "NOT_PROBED"];
export const DRIFT_KINDS: readonly DriftKind[] = ["NONE", "COMPATIBLE", "BREAKING"];

/** A version's liveness as stored (migration 0021): the published columns and the failures in a row. */
export interface LivenessNow {
  readonly state: LivenessStateName;
  /** Null until a probe found a card. */
  readonly drift: DriftKind | null;
  /** `meta.liveness` as protobuf JSON; null when never published. */
  readonly json: string | null;
  readonly failures: number;
}

/** What a version that has no liveness row yet is. */
export const NEVER_PROBED: LivenessNow = { state: "NOT_PROBED", drift: null, json: null, failures: 0 };

/** A new `meta.liveness`: its columns, and its JSON as answered. */
export interface PublishedLiveness {
  readonly state: LivenessStateName;
  readonly drift: DriftKind | null;
  readonly json: string;
}

/** What a probe found (live-card-fetch.ts's ProbeOutcome has this shape). */
export type ProbeResult =
  | { readonly ok: true; readonly card: Record<string, unknown>; readonly status: number; readonly latencyMs: number }
  | { readonly ok: false; readonly kind: string; readonly status?: number; readonly latencyMs: number };

/** What a version's liveness becomes, given what it is now; undefined: it stays as it is. */
export type LivenessDecision = (now: LivenessNow) => PublishedLiveness | undefined;

export interface ProbeVerdict {
  /** The new `meta.liveness` when the probe changed `state` or `drift`; undefined: nothing a reader sees changes. */
  readonly published: PublishedLiveness | undefined;
  /** The failures in a row after the probe. */
  readonly failures: number;
}

/** The most drift paths `meta.liveness` lists (a card of 100 skills all gone is 100 paths and more). */
export const MAX_DRIFT_PATHS = 100;

/** What a probe that found `result` at `checkedAt` makes of a version's liveness `now`. */
export function judgeProbe(
  now: LivenessNow,
  result: ProbeResult,
  registeredCard: Record<string, unknown>,
  downAfter: number,
  checkedAt: Date,
): ProbeVerdict {
  const base = {
    checkedAt: checkedAt.toISOString(),
    latencyMs: result.latencyMs,
    ...(result.status === undefined || result.status === 0 ? {} : { httpStatus: result.status }),
    previousState: LivenessState[now.state],
    ...(now.drift === null ? {} : { previousDrift: CardDrift[now.drift] }),
  };
  if (result.ok) {
    const { drift, differences } = cardDrift(registeredCard, result.card);
    if (now.state === "UP" && now.drift === drift) return { published: undefined, failures: 0 };
    const driftPaths = differences.slice(0, MAX_DRIFT_PATHS).map((d) => ({ path: d.path, kind: CardDrift[d.kind] }));
    const message = create(LivenessSchema, { ...base, state: LivenessState.UP, drift: CardDrift[drift], driftPaths });
    return { published: { state: "UP", drift, json: toJsonString(LivenessSchema, message) }, failures: 0 };
  }
  const failures = now.failures + 1;
  if (failures < downAfter || now.state === "DOWN") return { published: undefined, failures };
  const message = create(LivenessSchema, {
    ...base,
    state: LivenessState.DOWN,
    failure: failureOf(result.kind),
    consecutiveFailures: failures,
    ...(now.drift === null ? {} : { drift: CardDrift[now.drift], driftPaths: driftPathsOf(now.json) }),
  });
  return { published: { state: "DOWN", drift: now.drift, json: toJsonString(LivenessSchema, message) }, failures };
}

function failureOf(kind: string): ProbeFailure {
  const value = (ProbeFailure as unknown as Record<string, number | undefined>)[kind];
  return value === undefined ? ProbeFailure.NETWORK : (value as ProbeFailure);
}

/** The drift paths of a published `meta.liveness`, kept while the agent is DOWN. */
function driftPathsOf(json: string | null): DriftPath[] {
  if (json === null) return [];
  const published: Liveness = fromJsonString(LivenessSchema, json);
  return published.driftPaths;
}

/**
 * The liveness filters of a request (issue 44), each absent when not asked for: the values protovalidate let
 * through, in the order of LIVENESS_STATES and DRIFT_KINDS.
 */
export function livenessFiltersOf(parts: {
  readonly liveness?: readonly string[];
  readonly drift?: readonly string[];
}): LivenessFilters {
  const liveness = LIVENESS_STATES.filter((s) => parts.liveness?.includes(s));
  const drift = DRIFT_KINDS.filter((d) => parts.drift?.includes(d));
  return { ...(liveness.length > 0 ? { liveness } : {}), ...(drift.length > 0 ? { drift } : {}) };
}

/** Which liveness states and drifts a list or watch asks for; absent: any. */
export interface LivenessFilters {
  readonly liveness?: readonly LivenessStateName[];
  readonly drift?: readonly DriftKind[];
}

/** The state and drift of a stored `meta.liveness` (its JSON; null: never probed). */
export function livenessOf(json: string | null | undefined): { state: LivenessStateName; drift: DriftKind | null } {
  if (json == null) return { state: "NOT_PROBED", drift: null };
  const { state, drift } = JSON.parse(json) as { state?: LivenessStateName; drift?: DriftKind };
  return { state: state ?? "NOT_PROBED", drift: drift ?? null };
}
