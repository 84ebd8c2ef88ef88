/** Which scenarios run at each size, and in what order. */
import type { Operation, Surface } from "./load-job.js";

/** What a scenario does, independent of where it sends it. */
export type Kind = "get" | "card" | "get-ref" | "list-first" | "list-deep" | "update" | "create" | SearchKind;

/** The search scenarios (`--search`), over REST only. */
export type SearchKind =
  | "search-first"
  | "search-deep"
  | "search-tag"
  | "search-q"
  | "search-q2"
  | "search-qprefix"
  | "search-qrel";
export const SEARCH_KINDS: readonly SearchKind[] = [
  "search-first",
  "search-deep",
  "search-tag",
  "search-q",
  "search-q2",
  "search-qprefix",
  "search-qrel",
];

/** The service, or the floor server (plain node:http + the driver). */
export type Target = "service" | "floor";

export interface Scenario {
  /** `<target> <surface> <kind>`, e.g. `service grpc get`; what --only matches. */
  readonly id: string;
  readonly target: Target;
  readonly surface: Surface;
  readonly kind: Kind;
}

export const KINDS: readonly Kind[] = ["create", "update", "get", "card", "get-ref", "list-first", "list-deep"];

export const KIND_LABELS: Record<Kind, string> = {
  create: "POST, new agent",
  update: "POST, existing key",
  get: "GET by id",
  card: "GET agent card by id",
  "get-ref": "GET by reference (Agent_ID=)",
  "list-first": "GET list, first page",
  "list-deep": "GET list, last page",
  "search-first": "GET list, first page (total from the counters)",
  "search-deep": "GET list, a page 500 tokens deep",
  "search-tag": "GET list, tag matching 1 %",
  "search-q": "GET list, q matching 1 %",
  "search-q2": "GET list, q of two words each on the same 1 %",
  "search-qprefix": "GET list, q of a word begun (quas) matching 1 %",
  "search-qrel": "GET list, q matching 1 %, orderBy=relevance",
};

export function operationOf(kind: Kind): Operation {
  if (kind === "get-ref") return "get";
  if (kind === "card") return "card";
  return kind === "list-first" || kind === "list-deep" || kind.startsWith("search-") ? "list" : (kind as Operation);
}

const scenario = (target: Target, surface: Surface, kind: Kind): Scenario => ({
  id: `${target} ${surface} ${kind}`,
  target,
  surface,
  kind,
});

/**
 * The scenarios of one size: reads first, while the tenant holds exactly
 * `size` definitions, then writes (creates add definitions; the next size
 * tops up from there). Each service scenario is followed by its floor. At
 * `surfacesAt`, the same operations also run over Connect and gRPC.
 */
export function scenariosAt(size: number, surfacesAt: number, only: RegExp | undefined, search = false): Scenario[] {
  const sideBySide = size === surfacesAt;
  const list: Scenario[] = [];
  if (search) {
    for (const kind of SEARCH_KINDS) list.push(scenario("service", "rest", kind));
    return only === undefined ? list : list.filter((s) => only.test(s.id));
  }
  const both = (kind: Kind): void => void list.push(scenario("service", "rest", kind), scenario("floor", "rest", kind));
  const surfaces = (kind: Kind): void => {
    if (sideBySide) list.push(scenario("service", "connect", kind), scenario("service", "grpc", kind));
  };
  for (const kind of ["get", "get-ref", "list-first", "list-deep"] as const) both(kind);
  // The agent card (issue 43: signed once per revision): the floor has no card to compare with.
  list.push(scenario("service", "rest", "card"));
  surfaces("get");
  surfaces("card");
  surfaces("list-first");
  both("update");
  both("create");
  surfaces("create");
  return only === undefined ? list : list.filter((s) => only.test(s.id));
}
