/**
 * An A2A agent card (v1.0, or v0.3's `url`) as a definition of the registry: what maps, and the paths of what
 * does not. Provider: `Provider=<organization>`, white space in the organization's name made `_` (an id holds
 * none). The URL: the first of `supportedInterfaces` (v0.3: `url`). Host configuration is the registry's own:
 * a card has none.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

export interface MappedCard {
  readonly definition: JsonObject;
  /** The card's members (JSON paths) that have no place in a definition. */
  readonly unmapped: readonly string[];
  /** What was changed on the way (a provider's name made an id). */
  readonly notes: readonly string[];
}

type Card = Record<string, unknown>;

const isObject = (v: unknown): v is Card => typeof v === "object" && v !== null && !Array.isArray(v);
const modes = (v: unknown): JsonValue[] | undefined =>
  Array.isArray(v) ? v.filter((m) => typeof m === "string").map((type) => ({ type })) : undefined;

/** Members copied as they are, when the card has them. */
const AS_IS = ["name", "description", "version", "iconUrl", "documentationUrl", "supportsAuthenticatedExtendedCard"];
const CAPABILITIES = ["streaming", "pushNotifications", "stateTransitionHistory"];
const SKILL_AS_IS = ["id", "name", "description"];

export function definitionFromCard(card: Card): MappedCard {
  const definition: JsonObject = {};
  const unmapped: string[] = [];
  const notes: string[] = [];
  const handled = new Set([...AS_IS, "url", "supportedInterfaces", "provider", "capabilities", "skills"]);
  handled.add("defaultInputModes").add("defaultOutputModes");
  for (const name of AS_IS) if (card[name] !== undefined) definition[name] = card[name] as JsonValue;
  const interfaces = Array.isArray(card.supportedInterfaces) ? card.supportedInterfaces : [];
  const first = interfaces[0];
  const url = isObject(first) && typeof first.url === "string" ? first.url : card.url;
  if (typeof url === "string") definition.url = url;
  interfaces.slice(1).forEach((_, i) => unmapped.push(`supportedInterfaces[${i + 1}]`));
  if (isObject(first))
    for (const key of Object.keys(first)) if (key !== "url") unmapped.push(`supportedInterfaces[0].${key}`);
  if (typeof card.url === "string" && definition.url !== card.url) unmapped.push("url");
  mapProvider(card.provider, definition, unmapped, notes);
  if (isObject(card.capabilities)) {
    const capabilities: JsonObject = {};
    for (const [key, value] of Object.entries(card.capabilities)) {
      if (CAPABILITIES.includes(key) && typeof value === "boolean") capabilities[key] = value;
      else unmapped.push(`capabilities.${key}`);
    }
    definition.capabilities = capabilities;
  }
  for (const name of ["defaultInputModes", "defaultOutputModes"]) {
    const m = modes(card[name]);
    if (m !== undefined) definition[name] = m;
  }
  definition.skills = (Array.isArray(card.skills) ? card.skills : []).map((skill, i) => mapSkill(skill, i, unmapped));
  for (const key of Object.keys(card)) if (!handled.has(key)) unmapped.push(key);
  return { definition, unmapped, notes };
}

function mapProvider(provider: unknown, definition: JsonObject, unmapped: string[], notes: string[]): void {
  if (!isObject(provider)) return;
  for (const key of Object.keys(provider)) if (key !== "organization") unmapped.push(`provider.${key}`);
  if (typeof provider.organization !== "string" || provider.organization.trim() === "") return;
  const id = `Provider=${provider.organization.trim().replace(/\s+/g, "_")}`;
  if (id !== `Provider=${provider.organization}`)
    notes.push(`provider.organization "${provider.organization}" became provider.id "${id}" (an id has no spaces)`);
  definition.provider = { id };
}

function mapSkill(skill: unknown, i: number, unmapped: string[]): JsonValue {
  const out: JsonObject = {};
  if (!isObject(skill)) return out;
  for (const [key, value] of Object.entries(skill)) {
    if (SKILL_AS_IS.includes(key)) out[key] = value as JsonValue;
    else if (key === "tags" && Array.isArray(value))
      out.tags = value.filter((t) => typeof t === "string").map((tag) => ({ tag }));
    else if ((key === "inputModes" || key === "outputModes") && modes(value) !== undefined) out[key] = modes(value)!;
    else unmapped.push(`skills[${i}].${key}`);
  }
  return out;
}
