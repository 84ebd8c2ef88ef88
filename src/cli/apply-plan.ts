/**
 * What `asor apply` does to a tenant, decided before any write (and all `diff` and `--dry-run` show): each
 * file's definition against the stored version of its name, provider and version; with `--prune`, the stored
 * versions of the providers the files name that no file holds.
 */
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type { FileDefinition } from "./definition-files.js";
import { changedMembers, storedDefinition } from "./definition-form.js";
import type { StoredJson } from "./registry-client.js";
import { keyOf } from "./validate.js";

export type StepAction = "create" | "update" | "unchanged" | "deprecate";

export interface Step {
  readonly action: StepAction;
  readonly name: string;
  readonly provider: string;
  readonly version: string;
  /** The file (and `[i]` in a list file) the definition is from; none for a version to deprecate. */
  readonly file?: string;
  /** The stored version's id (update, unchanged, deprecate). */
  readonly id?: string;
  /** update: the top-level members that change. */
  readonly fields?: readonly string[];
  /** create, update: the definition to POST. */
  readonly definition?: AgentDefinition;
}

/** Statuses `--prune` leaves as they are: already out of use. */
const PRUNED = new Set(["DEPRECATED", "DEACTIVATED"]);

/** The providers the files name: `--prune` and the stored versions read are limited to them. */
export function providersOf(files: readonly FileDefinition[]): string[] {
  return [...new Set(files.map((f) => f.definition.provider?.id ?? ""))].filter((p) => p !== "").sort();
}

/** The steps that make the tenant hold `files` (and, with `prune`, deprecate what they no longer hold). */
export function planApply(files: readonly FileDefinition[], stored: readonly StoredJson[], prune: boolean): Step[] {
  const byKey = new Map<string, { json: StoredJson; def: AgentDefinition }>();
  for (const json of stored) {
    const def = storedDefinition(json);
    byKey.set(keyOf(def), { json, def });
  }
  const steps: Step[] = files.map(({ file, at, definition }) => {
    const base = {
      name: definition.name,
      provider: definition.provider?.id ?? "",
      version: definition.version,
      file: `${file}${at}`,
    };
    const found = byKey.get(keyOf(definition));
    if (found === undefined) return { ...base, action: "create", definition };
    const fields = changedMembers(definition, found.def);
    return fields.length === 0
      ? { ...base, action: "unchanged", id: found.json.id }
      : { ...base, action: "update", id: found.json.id, fields, definition };
  });
  if (prune) {
    const held = new Set(files.map((f) => keyOf(f.definition)));
    for (const [key, { json, def }] of byKey) {
      if (held.has(key) || PRUNED.has(json.meta?.status ?? "")) continue;
      steps.push({
        action: "deprecate",
        name: def.name,
        provider: def.provider?.id ?? "",
        version: def.version,
        id: json.id,
      });
    }
  }
  return steps;
}

/** How many steps of each action. */
export function countSteps(steps: readonly Step[]): Record<StepAction, number> {
  const counts: Record<StepAction, number> = { create: 0, update: 0, unchanged: 0, deprecate: 0 };
  for (const step of steps) counts[step.action]++;
  return counts;
}
