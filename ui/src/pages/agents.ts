/**
 * The agents page: the registry's list (`GET /asor/v1/agentDefinition`) with its search (`q`), filters (status,
 * tag, provider, resource), total and cursor paging (`pageToken`). The filters live in the page's address, so
 * back and forward and a copied link give the same list.
 */
import { type ListQuery, listDefinitions } from "../api.js";
import { h, replace, when } from "../dom.js";
import type { DefinitionPage } from "../model.js";
import { agentPath, navigate } from "../router.js";
import { errorBox, nameOf, statusBadge } from "./common.js";

const FILTERS = ["q", "status", "tag", "provider", "resource"] as const;
const STATUSES: readonly [string, string][] = [
  ["", "Active and deprecated"],
  ["ACTIVE", "Active"],
  ["DEPRECATED", "Deprecated"],
  ["DEACTIVATED", "Deactivated"],
  ["ALL", "All"],
];
const PAGE_SIZE = "20";

/** The page tokens of the pages before the current one, for "Previous page" (the same filters). */
let previous: string[] = [];
let previousFilters = "";

export function agentsPage(main: HTMLElement, query: URLSearchParams): void {
  const filters = new URLSearchParams();
  for (const name of FILTERS) {
    const value = query.get(name);
    if (value !== null && value !== "") filters.set(name, value);
  }
  if (filters.toString() !== previousFilters) {
    previous = [];
    previousFilters = filters.toString();
  }
  const pageToken = query.get("pageToken") ?? undefined;

  const input = (name: string, label: string, type = "text") =>
    h(
      "div",
      { class: "control" },
      h("label", { for: `filter-${name}` }, label),
      h("input", { id: `filter-${name}`, name, type, value: filters.get(name) ?? "", autocomplete: "off" }),
    );
  const status = h(
    "select",
    { id: "filter-status", name: "status" },
    STATUSES.map(([value, label]) => h("option", { value, selected: (filters.get("status") ?? "") === value }, label)),
  );
  const form = h(
    "form",
    {
      role: "search",
      class: "filters",
      onsubmit: (event: Event) => {
        event.preventDefault();
        const data = new FormData(event.currentTarget as HTMLFormElement);
        const next = new URLSearchParams();
        for (const name of FILTERS) {
          const value = String(data.get(name) ?? "").trim();
          if (value !== "") next.set(name, value);
        }
        const text = next.toString();
        navigate(`/ui/agents${text === "" ? "" : `?${text}`}`);
      },
    },
    h(
      "div",
      { class: "control search" },
      h("label", { for: "filter-q" }, "Search"),
      h("input", { id: "filter-q", name: "q", type: "search", value: filters.get("q") ?? "", autocomplete: "off" }),
    ),
    h("div", { class: "control" }, h("label", { for: "filter-status" }, "Status"), status),
    input("tag", "Tag"),
    input("provider", "Provider"),
    input("resource", "Resource"),
    h("div", { class: "control" }, h("button", { type: "submit" }, "Find")),
  );
  const results = h("section", { "aria-live": "polite", "aria-busy": "true" }, h("p", { class: "note" }, "Loading…"));
  replace(main, h("h1", null, "Agents"), form, results);

  const request: ListQuery = { ...Object.fromEntries(filters), limit: PAGE_SIZE, pageToken };
  listDefinitions(request).then(
    (page) => {
      if (!results.isConnected) return; // the page moved on meanwhile
      results.setAttribute("aria-busy", "false");
      replace(results, ...listOf(page, filters, pageToken));
    },
    (error: unknown) => {
      if (!results.isConnected) return;
      results.setAttribute("aria-busy", "false");
      replace(results, errorBox(error, "The list could not be read"));
    },
  );
}

function listOf(page: DefinitionPage, filters: URLSearchParams, pageToken: string | undefined): Node[] {
  const total = h("p", { class: "total", id: "total" }, `${page.total} ${page.total === 1 ? "agent" : "agents"}`);
  if (page.data.length === 0) return [total, h("p", { class: "note" }, "No agent matches.")];
  const table = h(
    "table",
    { class: "agents", "aria-describedby": "total" },
    h(
      "thead",
      null,
      h(
        "tr",
        null,
        ["Name", "Provider", "Version", "Status", "Changed"].map((c) => h("th", { scope: "col" }, c)),
      ),
    ),
    h(
      "tbody",
      null,
      page.data.map((d) =>
        h(
          "tr",
          null,
          h("th", { scope: "row" }, h("a", { href: agentPath(d.id) }, d.name)),
          h("td", { "data-label": "Provider" }, nameOf(d.provider)),
          h("td", { "data-label": "Version" }, d.version),
          h("td", { "data-label": "Status" }, statusBadge(d.meta?.status)),
          h("td", { "data-label": "Changed" }, when(d.meta?.updatedAt)),
        ),
      ),
    ),
  );
  const at = (token: string | undefined) => {
    const params = new URLSearchParams(filters);
    if (token !== undefined) params.set("pageToken", token);
    const text = params.toString();
    return `/ui/agents${text === "" ? "" : `?${text}`}`;
  };
  const nav = h(
    "nav",
    { class: "paging", "aria-label": "Pages" },
    pageToken !== undefined &&
      h(
        "button",
        {
          type: "button",
          onclick: () => {
            const back = previous.pop();
            navigate(at(back === "" ? undefined : back));
          },
        },
        "Previous page",
      ),
    page.nextPageToken !== undefined &&
      h(
        "button",
        {
          type: "button",
          onclick: () => {
            previous.push(pageToken ?? "");
            navigate(at(page.nextPageToken));
          },
        },
        "Next page",
      ),
  );
  return [total, table, nav];
}
