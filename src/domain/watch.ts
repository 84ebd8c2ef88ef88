/**
 * A watch's events and its filter (issue 20): what every surface streams, and which changes a watcher
 * asked for. The filters are the list's exact filters (list-query.ts), matched against the definition
 * an event carries instead of the term index, so one change read once serves every watcher.
 */
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import { type FilterParts, forEachFilterParam, forEachFilterValue, type TermKind } from "./list-query.js";
import { type LivenessFilters, livenessFiltersOf, livenessOf } from "./liveness.js";
import { DEFINITION_STATUSES, type DefinitionStatus, type StoredDefinition } from "./records.js";

/** The kinds of an event, by their wire names. */
export type WatchEventType = "ADDED" | "MODIFIED" | "STATUS_CHANGED" | "LIVENESS_CHANGED" | "BOOKMARK";

/**
 * One event: a change at `revision` with its definition as it is now (a later change of it follows as its
 * own event), or a BOOKMARK: every change up to `revision` that the filter passes has been sent.
 */
export type WatchEvent =
  | {
      readonly type: Exclude<WatchEventType, "BOOKMARK">;
      readonly revision: number;
      readonly stored: StoredDefinition;
    }
  | { readonly type: "BOOKMARK"; readonly revision: number; readonly stored?: undefined };

/** The request members a filter is made from (WatchAgentDefinitionsRequest's, by their TS names). */
export type WatchFilterParts = FilterParts;

type FilterKind = Exclude<TermKind, "word">;

/** Which changes a watcher gets: each filter given must match (AND), by any of its values (OR). */
export interface WatchFilter extends LivenessFilters {
  readonly terms: ReadonlyMap<FilterKind, ReadonlySet<string>>;
  /** Undefined: every status (the watch's default, unlike the list's). */
  readonly statuses?: ReadonlySet<DefinitionStatus>;
}

/** The filter a request asks for; the request's own validation (protovalidate) has checked the values. */
export function watchFilterOf(parts: WatchFilterParts): WatchFilter {
  const terms = new Map<FilterKind, ReadonlySet<string>>();
  forEachFilterParam(parts, (kind, values) => {
    if (values.length > 0) terms.set(kind, new Set(values));
  });
  const asked = parts.status.includes("ALL") ? [] : DEFINITION_STATUSES.filter((s) => parts.status.includes(s));
  const liveness = livenessFiltersOf(parts);
  return asked.length === 0 ? { terms, ...liveness } : { terms, statuses: new Set(asked), ...liveness };
}

/** The values each exact filter finds `definition` by (the same members the list's term index holds). */
export function filterValuesOf(definition: AgentDefinition): ReadonlyMap<FilterKind, ReadonlySet<string>> {
  const values = new Map<FilterKind, Set<string>>();
  const add = (kind: FilterKind, value: string | undefined) => {
    if (value === undefined || value === "") return;
    let set = values.get(kind);
    if (set === undefined) values.set(kind, (set = new Set()));
    set.add(value);
  };
  forEachFilterValue(definition, add);
  return values;
}

/**
 * Whether an event passes `filter`. A STATUS_CHANGED event passes the status filter whatever status it
 * shows: a watcher of ACTIVE definitions learns that one it holds left ACTIVE; a LIVENESS_CHANGED event passes
 * the liveness filters the same way (a watcher of DOWN agents learns that one came back).
 */
export function passesWatchFilter(
  filter: WatchFilter,
  type: WatchEvent["type"],
  stored: Pick<StoredDefinition, "status" | "liveness">,
  values: () => ReadonlyMap<FilterKind, ReadonlySet<string>>,
): boolean {
  if (filter.statuses !== undefined && type !== "STATUS_CHANGED" && !filter.statuses.has(stored.status)) return false;
  if ((filter.liveness !== undefined || filter.drift !== undefined) && type !== "LIVENESS_CHANGED") {
    const { state, drift } = livenessOf(stored.liveness);
    if (filter.liveness !== undefined && !filter.liveness.includes(state)) return false;
    if (filter.drift !== undefined && (drift === null || !filter.drift.includes(drift))) return false;
  }
  if (filter.terms.size === 0) return true;
  const have = values();
  for (const [kind, wanted] of filter.terms) {
    const found = have.get(kind);
    if (found === undefined || ![...wanted].some((v) => found.has(v))) return false;
  }
  return true;
}
