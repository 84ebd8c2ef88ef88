/**
 * The lifecycle rules of a version (README, "Lifecycle"): its ETag, the
 * conditions of conditional requests, and the checks of an update by id.
 * Pure: no I/O.
 */
import { type Issue, invalid, issueAt, preconditionFailed, RegistryError } from "./errors.js";
import type { InstanceRef, UpsertKey } from "./records.js";

/**
 * The strong entity tag of a revision of a version: `"<id>-<revision>"`. The
 * id keeps tags of different versions apart (an `If-None-Match` list may name
 * several); the revision changes on every change of content or status.
 */
export function etagOf(version: Pick<InstanceRef, "id" | "revision">): string {
  return `"${version.id}-${version.revision}"`;
}

/** A condition on the current version: `*` (any version), or a list of entity tags as sent. */
export type EntityTagCondition = "*" | readonly string[];

/**
 * An `If-Match` / `If-None-Match` value (RFC 9110 §13.1): `*`, or a
 * comma-separated list of entity tags, each `"..."` or `W/"..."`. A bare tag
 * (an RPC's `etag` without its quotes) is taken as the quoted one.
 */
export function parseEntityTags(value: string): EntityTagCondition {
  const trimmed = value.trim();
  if (trimmed === "*") return "*";
  // The registry's tags hold no commas, so a comma always separates two tags.
  return trimmed
    .split(",")
    .map((tag) => tag.trim())
    .filter((tag) => tag !== "")
    .map((tag) => (tag.startsWith('"') || tag.startsWith("W/") ? tag : `"${tag}"`));
}

/**
 * `If-Match` (strong comparison: a weak tag never matches): whether `current` satisfies it; an absent version
 * satisfies nothing.
 */
export function ifMatchHolds(
  condition: EntityTagCondition,
  current: Pick<InstanceRef, "id" | "revision"> | undefined,
): boolean {
  if (current === undefined) return false;
  if (condition === "*") return true;
  const etag = etagOf(current);
  return condition.some((tag) => tag === etag);
}

/** `If-None-Match` on a read (weak comparison): whether the client's copy is current, so a 304 answers. */
export function ifNoneMatchMatches(condition: EntityTagCondition, etag: string): boolean {
  if (condition === "*") return true;
  return condition.some((tag) => (tag.startsWith("W/") ? tag.slice(2) : tag) === etag);
}

/**
 * Checks a write's `etag` (If-Match) against the version it would change:
 * 412 PRECONDITION_FAILED when it does not hold. An empty `etag` is no
 * condition (an RPC's unset field; REST refuses an empty header before);
 * one that names no tag (only spaces or commas) is 400, not a condition that
 * nothing meets.
 */
export function checkIfMatch(
  etag: string,
  current: Pick<InstanceRef, "id" | "revision"> | undefined,
  what: string,
): void {
  if (etag === "") return;
  const condition = parseEntityTags(etag);
  if (condition !== "*" && condition.length === 0) {
    throw invalid([
      issueAt(
        "etag",
        "INVALID_VALUE",
        "The etag (If-Match) names no entity tag: send meta.etag, or *, or leave it out.",
      ),
    ]);
  }
  if (ifMatchHolds(condition, current)) return;
  const message =
    current === undefined
      ? `If-Match (etag) needs an existing ${what}, and there is none.`
      : `${what} has changed: its ETag is now ${etagOf(current)}, not ${etag}. Read it again.`;
  throw preconditionFailed(message, "etag");
}

/** A create-only write (`If-None-Match: *`) that met an existing version: 412. */
export function checkCreateOnly(createOnly: boolean, current: Pick<InstanceRef, "id" | "revision"> | undefined): void {
  if (!createOnly || current === undefined) return;
  throw preconditionFailed(
    `If-None-Match: * asks to create only, but this name, provider and version is already ${current.id} (ETag ` +
      `${etagOf(current)}).`,
    "createOnly",
  );
}

/** KEY_CHANGED, naming each member of the key an update by id would change. */
export function checkKeyKept(sent: UpsertKey, own: UpsertKey): void {
  const issues: Issue[] = [];
  const changed = (path: string, from: string, to: string) =>
    issues.push(
      issueAt(
        path,
        "KEY_CHANGED",
        `${path} is "${from}" for this version and cannot become "${to}"; POST a new version instead.`,
      ),
    );
  if (sent.name !== own.name) changed("name", own.name, sent.name);
  if (sent.providerId !== own.providerId) changed("provider.id", own.providerId, sent.providerId);
  if (sent.version !== own.version) changed("version", own.version, sent.version);
  if (issues.length === 0) return;
  throw new RegistryError(
    "KEY_CHANGED",
    issues.length === 1 ? (issues[0] as Issue).message : `An update by id changes ${issues.length} members of the key.`,
    issues,
  );
}
