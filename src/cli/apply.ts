/**
 * `asor diff -f <dir>` and `asor apply -f <dir> [--dry-run] [--prune]`: the files are checked as `validate`
 * checks them (any problem: exit 1, nothing read or written), the plan is made against what the registry holds
 * for the providers the files name (apply-plan.ts), then shown (diff, --dry-run) or carried out one write at a
 * time, each reported as it is done. Idempotent: a definition equal to the stored one is not POSTed.
 */
import { toJson } from "@bufbuild/protobuf";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { countSteps, planApply, providersOf, type Step, type StepAction } from "./apply-plan.js";
import { EXIT_OK, EXIT_PROBLEMS, usageFailure } from "./exit-codes.js";
import type { Colour, Output } from "./output.js";
import type { RegistryClient, StoredJson } from "./registry-client.js";
import { checkedDefinitionFiles, type DefinitionRules, printProblems } from "./validate.js";

export interface ApplyOptions {
  readonly files: readonly string[];
  readonly dryRun: boolean;
  readonly prune: boolean;
}

const DONE: Record<StepAction, string> = {
  create: "created",
  update: "updated",
  unchanged: "unchanged",
  deprecate: "deprecated",
};
const COLOUR: Record<StepAction, Colour> = { create: "green", update: "yellow", unchanged: "dim", deprecate: "red" };

/** Why a pruned version was deprecated: its status message. */
const PRUNE_MESSAGE = "Deprecated by asor apply --prune: no file of the applied directory holds this version.";

/** The plan for `options.files`, or undefined (exit 1) when a file has problems (printed). */
async function plan(
  options: ApplyOptions,
  client: () => RegistryClient,
  rules: DefinitionRules,
  output: Output,
): Promise<Step[] | undefined> {
  if (options.files.length === 0) throw usageFailure("which directory? pass -f <dir> (or files)");
  const { definitions, problems } = await checkedDefinitionFiles(options.files, rules);
  if (problems.length > 0) {
    printProblems(output, problems);
    output.line(`${problems.length} problem(s): nothing applied`);
    output.document({ ok: false, problems });
    return undefined;
  }
  const registry = client();
  const stored: StoredJson[] = [];
  for (const provider of providersOf(definitions))
    stored.push(
      ...(await registry.list([
        ["provider", provider],
        ["status", "ALL"],
      ])),
    );
  return planApply(definitions, stored, options.prune);
}

/** One step as a line of text: `created  Name 1.0.0 (Provider=X)  file`, with the fields an update changes. */
function stepLine(output: Output, step: Step, words: string): string {
  const what = `${step.name} ${step.version} (${step.provider})`;
  const fields = step.fields === undefined ? "" : `: ${step.fields.join(", ")}`;
  const from = step.file === undefined ? "" : `  ${output.paint("dim", step.file)}`;
  return `${output.paint(COLOUR[step.action], words.padEnd(12))} ${what}${fields}${from}`;
}

/** The JSON of a step for `--output json`. */
function stepJson(step: Step) {
  const { definition: _definition, action, ...rest } = step;
  return { action: DONE[action], ...rest };
}

function summary(steps: readonly Step[], prefix: string): string {
  const n = countSteps(steps);
  return `${prefix}${n.create} created, ${n.update} updated, ${n.unchanged} unchanged, ${n.deprecate} deprecated`;
}

/** `asor diff`: exit 1 when applying would change anything (as `kubectl diff`), 0 when not. */
export async function diffCommand(
  options: ApplyOptions,
  client: () => RegistryClient,
  rules: DefinitionRules,
  output: Output,
): Promise<number> {
  const steps = await plan(options, client, rules, output);
  if (steps === undefined) return EXIT_PROBLEMS;
  for (const step of steps)
    output.line(stepLine(output, step, `would ${step.action === "unchanged" ? "keep" : step.action}`));
  const changes = steps.filter((s) => s.action !== "unchanged").length;
  output.line(summary(steps, "if applied: "));
  output.document({ ok: true, dryRun: true, changes, counts: countSteps(steps), steps: steps.map(stepJson) });
  return changes === 0 ? EXIT_OK : EXIT_PROBLEMS;
}

/** `asor apply`: carries out the plan (or, with --dry-run, shows it in apply's words). */
export async function applyCommand(
  options: ApplyOptions,
  client: () => RegistryClient,
  rules: DefinitionRules,
  output: Output,
): Promise<number> {
  const steps = await plan(options, client, rules, output);
  if (steps === undefined) return EXIT_PROBLEMS;
  const registry = options.dryRun ? undefined : client();
  const done: Step[] = [];
  for (const [i, step] of steps.entries()) {
    if (registry !== undefined) await carryOut(registry, step);
    done.push(step);
    output.line(
      stepLine(
        output,
        step,
        options.dryRun ? `would ${step.action === "unchanged" ? "keep" : step.action}` : DONE[step.action],
      ),
    );
    output.progress("applying", i + 1, steps.length);
  }
  output.line(summary(done, options.dryRun ? "dry run, nothing written: " : ""));
  output.document({ ok: true, dryRun: options.dryRun, counts: countSteps(done), steps: done.map(stepJson) });
  return EXIT_OK;
}

async function carryOut(registry: RegistryClient, step: Step): Promise<void> {
  if ((step.action === "create" || step.action === "update") && step.definition !== undefined)
    await registry.upsert(toJson(AgentDefinitionSchema, step.definition));
  else if (step.action === "deprecate" && step.id !== undefined)
    await registry.setStatus(step.id, "DEPRECATED", PRUNE_MESSAGE);
}
