/**
 * `asor validate`: the registry's checks of a POST, offline. After the body check (definition-files.ts), each
 * definition gets the service's own rules: the contract's (validation.ts contractIssues), its identifying text,
 * across members and the host platform (definition-issues.ts, the same function the service calls), and the
 * bound on its search terms (search-terms.ts). The host system's provider and platform, and the bound, are
 * read from the environment as the service reads them (HOST_PROVIDER_ID, HOST_PLATFORM_ID,
 * MAX_TERMS_PER_DEFINITION). Beyond the service: two definitions of the files with the same name, provider
 * and version (DUPLICATE_DEFINITION), which `apply` could not tell apart.
 */
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { readNames } from "../config-sections.js";
import { definitionRuleIssues, joinIssues } from "../domain/definition-issues.js";
import type { HostIdentity } from "../domain/host-platform.js";
import { DEFAULT_MAX_TERMS_PER_DEFINITION, definitionIndexOf, termCountIssue } from "../domain/search-terms.js";
import { contractIssues } from "../domain/validation.js";
import {
  asProblem,
  type FileDefinition,
  type FileProblem,
  type ReadFiles,
  readDefinitionFiles,
} from "./definition-files.js";
import { EXIT_OK, EXIT_PROBLEMS, usageFailure } from "./exit-codes.js";
import type { Output } from "./output.js";

/** What the service's configuration says of definitions, from `env` (defaults as the service's). */
export interface DefinitionRules {
  readonly host: HostIdentity;
  readonly maxTerms: number;
}

export function definitionRules(env: Readonly<Record<string, string | undefined>>): DefinitionRules {
  const problems: string[] = [];
  const { hostSystem } = readNames(env as Record<string, string>, problems);
  const maxTerms = Number(env.MAX_TERMS_PER_DEFINITION || DEFAULT_MAX_TERMS_PER_DEFINITION);
  if (!Number.isInteger(maxTerms) || maxTerms < 1) problems.push("MAX_TERMS_PER_DEFINITION must be an integer");
  if (problems.length > 0) throw usageFailure(problems.join("; "));
  return { host: hostSystem, maxTerms };
}

/** The problems of one definition read from a file, by the service's rules. */
export function definitionProblems(read: FileDefinition, rules: DefinitionRules): FileProblem[] {
  const def = read.definition;
  const index = definitionIndexOf(def);
  const terms = termCountIssue(def, rules.maxTerms, index.terms.length);
  const issues = joinIssues(
    joinIssues(contractIssues(AgentDefinitionSchema, def), definitionRuleIssues(def, rules.host)),
    terms === undefined ? [] : [terms],
  );
  return issues.map((issue) => asProblem(read.file, issue, read.at));
}

/** The key `apply` matches stored definitions by: name, provider.id and version. */
export function keyOf(def: FileDefinition["definition"]): string {
  return JSON.stringify([def.name, def.provider?.id ?? "", def.version]);
}

/** The files' definitions and every problem of them (their JSON, the service's rules, duplicate keys). */
export async function checkedDefinitionFiles(paths: readonly string[], rules: DefinitionRules): Promise<ReadFiles> {
  const read = await readDefinitionFiles(paths);
  const problems = [...read.problems];
  const seen = new Map<string, FileDefinition>();
  for (const item of read.definitions) {
    problems.push(...definitionProblems(item, rules));
    const key = keyOf(item.definition);
    const first = seen.get(key);
    if (first === undefined) seen.set(key, item);
    else {
      const { name, version, provider } = item.definition;
      const message = `${name} ${version} of ${provider?.id} is also in ${first.file}${first.at}.`;
      problems.push({ file: item.file, path: item.at, code: "DUPLICATE_DEFINITION", message });
    }
  }
  return { definitions: read.definitions, problems };
}

/** Prints `problems`, one line each (text) or as the JSON document's `problems`. */
export function printProblems(output: Output, problems: readonly FileProblem[]): void {
  for (const p of problems) output.line(problemLine(output, p));
}

/** `error <file>: <path>: <code>: <message>`. */
export function problemLine(output: Output, p: FileProblem): string {
  const where = p.path === "" ? p.file : `${p.file}: ${p.path}`;
  return `${output.paint("red", "error")} ${where}: ${output.paint("yellow", p.code)}: ${p.message}`;
}

export async function validateCommand(paths: readonly string[], output: Output, rules: DefinitionRules) {
  if (paths.length === 0) throw usageFailure("validate needs files or directories: asor validate <files|dirs>");
  const { definitions, problems } = await checkedDefinitionFiles(paths, rules);
  const files = new Set(definitions.map((d) => d.file));
  printProblems(output, problems);
  output.line(
    problems.length === 0
      ? `${output.paint("green", "ok")}: ${definitions.length} definition(s) in ${files.size} file(s)`
      : `${problems.length} problem(s); ${definitions.length} definition(s) read`,
  );
  output.document({ ok: problems.length === 0, definitions: definitions.length, problems });
  return problems.length === 0 ? EXIT_OK : EXIT_PROBLEMS;
}
