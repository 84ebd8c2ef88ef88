/**
 * Two versions of an agent side by side (`?a=<id>&b=<id>`, both versions of the agent): each member, the skills
 * and each skill's host resources, with what was added, removed or changed from A to B marked in words (not by
 * colour alone).
 */
import { getDefinition, listVersions } from "../api.js";
import { type Child, h, replace } from "../dom.js";
import type { Definition, HostResource, Skill } from "../model.js";
import { agentPath, navigate } from "../router.js";
import { errorBox, nameOf } from "./common.js";

type Change = "same" | "changed" | "added" | "removed";

export function comparePage(main: HTMLElement, id: string, query: URLSearchParams): void {
  const loading = h("p", { class: "note", role: "status" }, "Loading…");
  replace(main, loading);
  const a = query.get("a") ?? id;
  const b = query.get("b") ?? id;
  Promise.all([listVersions(id), getDefinition(a), getDefinition(b)]).then(
    ([versions, left, right]) => {
      if (!loading.isConnected) return;
      const picker = (name: string, label: string, selected: string) =>
        h(
          "div",
          { class: "control" },
          h("label", { for: `compare-${name}` }, label),
          h(
            "select",
            { id: `compare-${name}`, name },
            versions.data.map((v) =>
              h("option", { value: v.id, selected: v.id === selected }, `${v.version} (${v.meta?.status ?? ""})`),
            ),
          ),
        );
      const form = h(
        "form",
        {
          class: "filters",
          onsubmit: (event: Event) => {
            event.preventDefault();
            const data = new FormData(event.currentTarget as HTMLFormElement);
            const next = new URLSearchParams({ a: String(data.get("a")), b: String(data.get("b")) });
            navigate(`${agentPath(id)}/compare?${next}`);
          },
        },
        picker("a", "Version A", a),
        picker("b", "Version B", b),
        h("div", { class: "control" }, h("button", { type: "submit" }, "Compare")),
      );
      replace(
        main,
        h("p", null, h("a", { href: agentPath(id) }, `Back to ${left.value.name}`)),
        h("h1", null, `Compare versions of ${left.value.name}`),
        form,
        comparison(left.value, right.value),
      );
    },
    (error: unknown) =>
      loading.isConnected &&
      replace(main, h("h1", null, "Compare versions"), errorBox(error, "The versions could not be read")),
  );
}

/** What changed, by what the page shows of each side (derived ids, which differ between versions, are not shown). */
function changeOf(a: string | undefined, b: string | undefined): Change {
  if (a === undefined && b !== undefined) return "added";
  if (a !== undefined && b === undefined) return "removed";
  return a === b ? "same" : "changed";
}

function row(label: string, a: unknown, b: unknown, show: (v: unknown) => string = text): HTMLElement {
  const change = changeOf(a === undefined ? undefined : show(a), b === undefined ? undefined : show(b));
  return h(
    "tr",
    { class: `change-${change}` },
    h("th", { scope: "row" }, label),
    h("td", { "data-label": "Version A" }, a === undefined ? "—" : show(a)),
    h("td", { "data-label": "Version B" }, b === undefined ? "—" : show(b)),
    h("td", { "data-label": "Change" }, change === "same" ? "" : change),
  );
}

function text(value: unknown): string {
  if (typeof value === "string") return value;
  // Media types: their types alone (each entry's derived id is not part of what a version declares).
  if (Array.isArray(value)) return value.map((v) => (v as { type?: string }).type ?? JSON.stringify(v)).join(", ");
  return JSON.stringify(value);
}

function table(caption: string, rows: Child): HTMLElement {
  return h(
    "table",
    { class: "compare" },
    h("caption", null, caption),
    h(
      "thead",
      null,
      h(
        "tr",
        null,
        ["", "Version A", "Version B", "Change"].map((c) => h("th", { scope: "col" }, c)),
      ),
    ),
    h("tbody", null, rows),
  );
}

function comparison(a: Definition, b: Definition): Child {
  const members = (
    [
      "name",
      "version",
      "description",
      "url",
      "overview",
      "documentationUrl",
      "iconUrl",
      "externalAgentID",
      "externalTenantID",
      "capabilities",
      "defaultInputModes",
      "defaultOutputModes",
      "supportsAuthenticatedExtendedCard",
    ] as const
  ).map((m) => row(m, a[m], b[m]));
  const skills = union(a.skills ?? [], b.skills ?? [], (s) => s.id).map(([id, x, y]) =>
    row(`${(y ?? x)?.name ?? id} (${id})`, x && skillText(x), y && skillText(y)),
  );
  const resources = union(resourceList(a), resourceList(b), (r) => r.key).map(([key, x, y]) =>
    row(key, x?.resource, y?.resource, (r) => resourceText(r as HostResource)),
  );
  return [
    table("Members", [
      row("provider", a.provider?.id, b.provider?.id),
      row("platform", a.platform && nameOf(a.platform), b.platform && nameOf(b.platform)),
      members,
    ]),
    table("Skills", skills),
    table(
      "Host resources by skill",
      resources.length > 0 ? resources : h("tr", null, h("td", { colspan: "4" }, "None in either version.")),
    ),
  ];
}

function skillText(s: Skill): string {
  const tags = (s.tags ?? []).map((t) => t.tag).join(", ");
  return `${s.name}: ${s.description}${tags === "" ? "" : ` [${tags}]`}`;
}

function resourceList(d: Definition): { key: string; resource: HostResource }[] {
  return (d.hostConfig ?? []).flatMap((item) =>
    (item.hostResources ?? []).map((resource) => ({
      key: `${item.skillId ?? "?"} / ${resource.tool_name}`,
      resource: { ...resource, executionMode: item.executionMode?.id } as HostResource,
    })),
  );
}

function resourceText(r: HostResource & { executionMode?: string }): string {
  const parts = [r.description ?? "", r.agent_resource?.id ? `resource ${r.agent_resource.id}` : ""];
  if (r.executionMode) parts.push(r.executionMode);
  if (r.tools && r.tools.length > 0) parts.push(`tools ${r.tools.map((t) => t.id).join(", ")}`);
  return parts.filter((p) => p !== "").join("; ");
}

/** The keys of both lists in order (A's first), with each side's item. */
function union<T>(a: readonly T[], b: readonly T[], key: (t: T) => string): [string, T | undefined, T | undefined][] {
  const left = new Map(a.map((t) => [key(t), t]));
  const right = new Map(b.map((t) => [key(t), t]));
  const keys = [...new Set([...left.keys(), ...right.keys()])];
  return keys.map((k) => [k, left.get(k), right.get(k)]);
}
