/**
 * Drift (issue 44, item 2): how an agent's live card differs from the card the registry renders for its
 * definition, and whether the difference can break a client that relies on the registered card. Pure.
 *
 * The rules:
 * - BREAKING: a registered skill (by `id`) the live card lacks; a registered interface (by `url`) the live card
 *   lacks, or offers with another `protocolBinding` or `protocolVersion`; another `version`; a capability the
 *   registered card declares true that the live card does not; any change of `securitySchemes` or
 *   `securityRequirements` when the registered card declares them.
 * - COMPATIBLE: every other difference: an added skill or interface; a skill's name, description, tags, examples
 *   or modes; the card's name, description, provider, modes, links, icon; security the live card declares when
 *   the registered card declares none (the registry's card cannot carry it); members outside A2A v1.0.
 * - Not compared: `signatures` (who signed says nothing of what the card offers), and the order of members.
 * A v0.3 card (a string `url`, no `supportedInterfaces`) is read as the interfaces it names (`url` with
 * `preferredTransport`, `additionalInterfaces`), at protocol version 0.3 unless it says otherwise.
 */

export type DriftKind = "NONE" | "COMPATIBLE" | "BREAKING";

export interface CardDifference {
  /**
   * Where, in the registered card's terms: `version`, `skills[id=find]`,
   * `supportedInterfaces[url=…].protocolBinding`.
   */
  readonly path: string;
  readonly kind: "COMPATIBLE" | "BREAKING";
}

export interface CardDrift {
  readonly drift: DriftKind;
  /** Sorted by path. */
  readonly differences: readonly CardDifference[];
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const isObject = (value: unknown): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value);
const objectsOf = (value: unknown): JsonObject[] => (Array.isArray(value) ? value.filter(isObject) : []);

/** Members compared by rules of their own; the rest of the card is compared as a whole, member by member. */
const OWN_RULES = new Set([
  "signatures",
  "skills",
  "supportedInterfaces",
  "version",
  "capabilities",
  "securitySchemes",
  "securityRequirements",
  "url",
  "preferredTransport",
  "additionalInterfaces",
  "protocolVersion",
]);

/** How `live` differs from `registered` (both cards as JSON). */
export function cardDrift(registered: Record<string, unknown>, live: Record<string, unknown>): CardDrift {
  const differences: CardDifference[] = [];
  const add = (path: string, kind: CardDifference["kind"]) => differences.push({ path, kind });
  compareSkills(objectsOf(registered.skills), objectsOf(live.skills), add);
  compareInterfaces(interfacesOf(registered), interfacesOf(live), add);
  if (!same(registered.version, live.version)) add("version", "BREAKING");
  compareCapabilities(registered.capabilities, live.capabilities, add);
  const securityIsRegistered =
    registered.securitySchemes !== undefined || registered.securityRequirements !== undefined;
  for (const member of ["securitySchemes", "securityRequirements"])
    if (!same(registered[member], live[member])) add(member, securityIsRegistered ? "BREAKING" : "COMPATIBLE");
  for (const member of new Set([...Object.keys(registered), ...Object.keys(live)]))
    if (!OWN_RULES.has(member) && !same(registered[member], live[member])) add(member, "COMPATIBLE");
  differences.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const drift: DriftKind = differences.some((d) => d.kind === "BREAKING")
    ? "BREAKING"
    : differences.length > 0
      ? "COMPATIBLE"
      : "NONE";
  return { drift, differences };
}

type Add = (path: string, kind: CardDifference["kind"]) => void;

function compareSkills(registered: JsonObject[], live: JsonObject[], add: Add): void {
  const liveById = new Map(live.map((skill) => [String(skill.id), skill]));
  const registeredIds = new Set(registered.map((skill) => String(skill.id)));
  for (const skill of registered) {
    const path = `skills[id=${String(skill.id)}]`;
    const counterpart = liveById.get(String(skill.id));
    if (counterpart === undefined) {
      add(path, "BREAKING");
      continue;
    }
    for (const member of new Set([...Object.keys(skill), ...Object.keys(counterpart)]))
      if (!same(skill[member], counterpart[member])) add(`${path}.${member}`, "COMPATIBLE");
  }
  for (const skill of live)
    if (!registeredIds.has(String(skill.id))) add(`skills[id=${String(skill.id)}]`, "COMPATIBLE");
}

interface Interface {
  readonly url: string;
  readonly protocolBinding: Json;
  readonly protocolVersion: Json;
}

/** A card's interfaces: v1.0's `supportedInterfaces`, or what a v0.3 card names. */
function interfacesOf(card: Record<string, unknown>): Interface[] {
  if (Array.isArray(card.supportedInterfaces))
    return objectsOf(card.supportedInterfaces).map((i) => ({
      url: String(i.url),
      protocolBinding: i.protocolBinding ?? null,
      protocolVersion: i.protocolVersion ?? null,
    }));
  if (typeof card.url !== "string") return [];
  const version = typeof card.protocolVersion === "string" ? card.protocolVersion : "0.3";
  const main = {
    url: card.url,
    protocolBinding: (card.preferredTransport as Json) ?? "JSONRPC",
    protocolVersion: version,
  };
  const more = objectsOf(card.additionalInterfaces).map((i) => ({
    url: String(i.url),
    protocolBinding: i.transport ?? null,
    protocolVersion: version,
  }));
  return [main, ...more];
}

function compareInterfaces(registered: Interface[], live: Interface[], add: Add): void {
  for (const wanted of registered) {
    const path = `supportedInterfaces[url=${wanted.url}]`;
    const offered = live.filter((i) => i.url === wanted.url);
    if (offered.length === 0) add(path, "BREAKING");
    else if (!offered.some((i) => same(i.protocolBinding, wanted.protocolBinding)))
      add(`${path}.protocolBinding`, "BREAKING");
    else if (!offered.some((i) => same(i.protocolVersion, wanted.protocolVersion)))
      add(`${path}.protocolVersion`, "BREAKING");
  }
  const registeredUrls = new Set(registered.map((i) => i.url));
  for (const i of live) if (!registeredUrls.has(i.url)) add(`supportedInterfaces[url=${i.url}]`, "COMPATIBLE");
}

function compareCapabilities(registered: unknown, live: unknown, add: Add): void {
  const mine = isObject(registered) ? registered : {};
  const theirs = isObject(live) ? live : {};
  for (const member of new Set([...Object.keys(mine), ...Object.keys(theirs)])) {
    if (same(mine[member], theirs[member])) continue;
    add(`capabilities.${member}`, mine[member] === true && theirs[member] !== true ? "BREAKING" : "COMPATIBLE");
  }
}

/** An empty list or object, which ProtoJSON leaves out: the same as a member not there. */
const isEmpty = (value: unknown): boolean =>
  value === undefined ||
  (Array.isArray(value) ? value.length === 0 : isObject(value) && Object.keys(value).length === 0);

/**
 * Equal as JSON values, whatever the order of members (a list holds its order); a member not there and an empty
 * list or object are equal (ProtoJSON leaves the empty out, a hand-written card may not).
 */
function same(a: unknown, b: unknown): boolean {
  if (a === b || (isEmpty(a) && isEmpty(b))) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item, i) => same(item, b[i]));
  }
  if (!isObject(a) || !isObject(b)) return false;
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].every((key) => same(a[key], b[key]));
}
