/**
 * An agent's page: one version (`GET .../agentDefinition/{id}`) as a card: what it is, each skill with its tags
 * and the host resources and tools it may use (the `hostConfig` item whose `skillId` names the skill), the
 * versions of the agent (newest first), its A2A agent card as JSON, the registry's `meta`, and the lifecycle
 * buttons. Each part that has its own request shows its own error, so one refusal (a card of a deactivated
 * version: 410) leaves the rest readable.
 */
import { getAgentCard, getDefinition, listVersions, type Tagged } from "../api.js";
import { type Child, field, h, replace, safeHref, when } from "../dom.js";
import type { Definition, HostResource, MimeType, Skill, SkillResource } from "../model.js";
import { agentPath } from "../router.js";
import { errorBox, nameOf, statusBadge } from "./common.js";
import { lifecycle } from "./lifecycle.js";

export function agentPage(main: HTMLElement, id: string, notice?: HTMLElement): void {
  const loading = h("p", { class: "note", role: "status" }, "Loading…");
  replace(main, loading);
  // An answer that comes after the page moved on (another address, another render) is dropped.
  getDefinition(id).then(
    (tagged) => loading.isConnected && render(main, tagged, notice),
    (error: unknown) =>
      loading.isConnected &&
      replace(main, h("h1", null, "Agent"), errorBox(error, "This agent could not be read"), backLink()),
  );
}

function backLink(): HTMLElement {
  return h("p", null, h("a", { href: "/ui/agents" }, "Back to the agents"));
}

function render(main: HTMLElement, tagged: Tagged<Definition>, notice: HTMLElement | undefined): void {
  const d = tagged.value;
  const versions = h("section", { "aria-labelledby": "versions-h" }, h("h2", { id: "versions-h" }, "Versions"));
  const card = h("section", { "aria-labelledby": "card-h" }, h("h2", { id: "card-h" }, "A2A agent card"));
  replace(
    main,
    backLink(),
    notice,
    h(
      "article",
      { class: "agent-card" },
      h("h1", null, d.name),
      h("p", { class: "subtitle" }, `Version ${d.version} `, statusBadge(d.meta?.status)),
      h("p", { class: "description" }, d.description),
      h("dl", { class: "facts" }, facts(d)),
    ),
    lifecycle(d, tagged.etag, (next) => agentPage(main, d.id, next)),
    h("section", { "aria-labelledby": "skills-h" }, h("h2", { id: "skills-h" }, "Skills"), skills(d)),
    versions,
    card,
    h("section", { "aria-labelledby": "meta-h" }, h("h2", { id: "meta-h" }, "Registry record"), meta(d, tagged.etag)),
  );
  fillVersions(versions, d);
  fillCard(card, d);
}

function link(value: string | undefined): Child {
  if (value === undefined || value === "") return null;
  const href = safeHref(value);
  return href === undefined ? value : h("a", { href, rel: "noopener noreferrer nofollow" }, value);
}

function modes(list: readonly MimeType[] | undefined): Child {
  const types = (list ?? []).map((m) => m.type).filter((t): t is string => t !== undefined && t !== "");
  return types.length === 0 ? null : types.join(", ");
}

function facts(d: Definition): Child[] {
  const capabilities = Object.entries(d.capabilities ?? {});
  return [
    field("URL", link(d.url)),
    field("Provider", d.provider && `${nameOf(d.provider)} (${d.provider.id})`),
    field("Platform", d.platform && `${nameOf(d.platform)} (${d.platform.id})`),
    field("Agent", d.reference_id),
    field("Overview", d.overview),
    field("Documentation", link(d.documentationUrl)),
    field("Icon", link(d.iconUrl)),
    field(
      "Capabilities",
      capabilities.length === 0 ? null : capabilities.map(([name, on]) => `${name}: ${on ? "yes" : "no"}`).join(", "),
    ),
    field("Input modes", modes(d.defaultInputModes)),
    field("Output modes", modes(d.defaultOutputModes)),
    field(
      "Extended card",
      d.supportsAuthenticatedExtendedCard === undefined ? null : d.supportsAuthenticatedExtendedCard ? "yes" : "no",
    ),
    field("External agent id", d.externalAgentID),
    field("External tenant id", d.externalTenantID),
  ];
}

function skills(d: Definition): Child {
  const list = d.skills ?? [];
  if (list.length === 0) return h("p", { class: "note" }, "No skills.");
  const resources = new Map<string, SkillResource>();
  for (const item of d.hostConfig ?? []) if (item.skillId !== undefined) resources.set(item.skillId, item);
  return h(
    "ul",
    { class: "skills" },
    list.map((skill) => h("li", null, skillCard(skill, resources.get(skill.id)))),
  );
}

function skillCard(skill: Skill, config: SkillResource | undefined): HTMLElement {
  const tags = skill.tags ?? [];
  return h(
    "section",
    { class: "skill", "aria-label": `Skill ${skill.name}` },
    h("h3", null, skill.name, " ", h("code", null, skill.id)),
    h("p", null, skill.description),
    tags.length > 0 &&
      h(
        "ul",
        { class: "tags", "aria-label": "Tags" },
        tags.map((t) => h("li", null, h("a", { href: `/ui/agents?tag=${encodeURIComponent(t.tag)}` }, t.tag))),
      ),
    h(
      "dl",
      { class: "facts" },
      field("Input modes", modes(skill.inputModes)),
      field("Output modes", modes(skill.outputModes)),
    ),
    h("h4", null, "Host resources"),
    resourcesOf(config),
  );
}

function resourcesOf(config: SkillResource | undefined): Child {
  if (config === undefined) return h("p", { class: "note" }, "No host configuration for this skill.");
  const list = config.hostResources ?? [];
  return [
    h("p", null, "Execution mode: ", h("strong", null, nameOf(config.executionMode) || "not set")),
    list.length === 0
      ? h("p", { class: "note" }, "No host resources.")
      : h(
          "table",
          { class: "resources" },
          h(
            "thead",
            null,
            h(
              "tr",
              null,
              ["Tool", "Description", "Resource", "Related items"].map((c) => h("th", { scope: "col" }, c)),
            ),
          ),
          h("tbody", null, list.map(resourceRow)),
        ),
  ];
}

function resourceRow(r: HostResource): HTMLElement {
  const resource = r.agent_resource;
  return h(
    "tr",
    null,
    h("th", { scope: "row" }, r.tool_name),
    h("td", { "data-label": "Description" }, r.description ?? ""),
    h(
      "td",
      { "data-label": "Resource" },
      resource?.id ?? "",
      resource?.descriptor ? ` (${resource.descriptor})` : "",
      resource?.type ? ` ${resource.type}` : "",
    ),
    h("td", { "data-label": "Related items" }, (r.tools ?? []).map((t) => t.descriptor ?? t.id).join(", ")),
  );
}

function fillVersions(section: HTMLElement, d: Definition): void {
  const body = h("p", { class: "note" }, "Loading…");
  section.append(body);
  listVersions(d.id).then(
    (page) => {
      const items = page.data.map((v) =>
        h(
          "li",
          { class: v.id === d.id ? "current" : undefined },
          v.id === d.id
            ? h("strong", { "aria-current": "page" }, `Version ${v.version}`)
            : h("a", { href: agentPath(v.id) }, `Version ${v.version}`),
          " ",
          statusBadge(v.meta?.status),
          " ",
          when(v.meta?.updatedAt),
        ),
      );
      // The two newest versions, older as A.
      const pair = new URLSearchParams({ a: page.data[1]?.id ?? d.id, b: page.data[0]?.id ?? d.id });
      const compare =
        page.data.length > 1 &&
        h("p", null, h("a", { href: `${agentPath(d.id)}/compare?${pair}` }, "Compare versions"));
      body.replaceWith(h("ol", { class: "timeline" }, items), compare || "");
    },
    (error: unknown) => body.replaceWith(errorBox(error, "The versions could not be read")),
  );
}

function fillCard(section: HTMLElement, d: Definition): void {
  const body = h("p", { class: "note" }, "Loading…");
  section.append(body);
  getAgentCard(d.id).then(
    (card) => {
      const json = JSON.stringify(card, null, 2);
      const said = h("span", { role: "status", class: "note" });
      const copy = h(
        "button",
        {
          type: "button",
          onclick: () => {
            navigator.clipboard.writeText(json).then(
              () => (said.textContent = "Copied."),
              (e: unknown) => (said.textContent = `Could not copy: ${(e as Error).message}`),
            );
          },
        },
        "Copy card JSON",
      );
      body.replaceWith(
        h("div", { class: "actions" }, copy, " ", said),
        h("pre", { class: "json", tabindex: "0", "aria-label": "Agent card JSON" }, json),
      );
    },
    (error: unknown) => body.replaceWith(errorBox(error, "The agent card could not be read")),
  );
}

function meta(d: Definition, etag: string | undefined): Child {
  const m = d.meta ?? {};
  return h(
    "dl",
    { class: "facts" },
    field("Id", h("code", null, d.id)),
    field("Status", m.status),
    field("Status message", m.statusMessage),
    field("Latest", m.latest === undefined ? null : m.latest ? "yes" : "no"),
    field("Created", when(m.createdAt)),
    field("Updated", when(m.updatedAt)),
    field("Status changed", when(m.statusChangedAt)),
    field("Revision", m.revision),
    field("ETag", h("code", null, etag ?? m.etag ?? "")),
  );
}
