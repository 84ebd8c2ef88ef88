/**
 * Definition files: JSON, one definition (an object) or a list of them (an array) per file; a directory stands
 * for its `.json` files, recursively, in name order. Each definition's JSON goes through the registry's own
 * body check (surfaces/encoding/body-check.ts: strict UTF-8 and JSON, unknown members, types), so a file is
 * refused here for what a POST of it would be refused for.
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { extname, join } from "node:path";
import type { JsonValue } from "@bufbuild/protobuf";
import { type AgentDefinition, AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { type Issue, RegistryError } from "../domain/errors.js";
import { checkJsonBody, messageOfCheckedJson } from "../surfaces/encoding/body-check.js";
import { parseStrictJsonText } from "../surfaces/encoding/strict-json.js";
import { usageFailure } from "./exit-codes.js";

/** One problem of one file: where (the file and the member's JSON path) and what (a registry issue code). */
export interface FileProblem {
  readonly file: string;
  /** The member's path; `[i].` first for the i-th definition of a list file. "" for the file as a whole. */
  readonly path: string;
  readonly code: string;
  readonly message: string;
}

/** One definition read from a file. */
export interface FileDefinition {
  readonly file: string;
  /** "" for a file of one definition, `[i]` for the i-th of a list. */
  readonly at: string;
  readonly definition: AgentDefinition;
}

export interface ReadFiles {
  readonly definitions: readonly FileDefinition[];
  readonly problems: readonly FileProblem[];
}

const YAML = new Set([".yaml", ".yml"]);
const encoder = new TextEncoder();

/** The files `paths` name: each file itself, each directory's `.json` (and `.yaml`, to refuse) files below it. */
export async function definitionFilePaths(paths: readonly string[]): Promise<string[]> {
  const found: string[] = [];
  for (const path of paths) {
    const info = await stat(path).catch(() => {
      throw usageFailure(`${path}: no such file or directory`);
    });
    if (!info.isDirectory()) found.push(path);
    else {
      const entries = await readdir(path, { recursive: true, withFileTypes: true });
      const files = entries
        .filter((e) => e.isFile() && (extname(e.name) === ".json" || YAML.has(extname(e.name))))
        .map((e) => join(e.parentPath, e.name))
        .sort();
      found.push(...files);
    }
  }
  return found;
}

/** Every definition of the files `paths` name, and every problem of their JSON. */
export async function readDefinitionFiles(paths: readonly string[]): Promise<ReadFiles> {
  const definitions: FileDefinition[] = [];
  const problems: FileProblem[] = [];
  for (const file of await definitionFilePaths(paths)) {
    const read = readDefinitionFile(file, await readFile(file));
    definitions.push(...read.definitions);
    problems.push(...read.problems);
  }
  return { definitions, problems };
}

/** The definitions of one file's `bytes`, or its problems. */
export function readDefinitionFile(file: string, bytes: Uint8Array): ReadFiles {
  const problem = (path: string, code: string, message: string): ReadFiles => ({
    definitions: [],
    problems: [{ file, path, code, message }],
  });
  if (YAML.has(extname(file)))
    return problem("", "UNSUPPORTED_FORMAT", "YAML files are not read yet: write the definition as JSON.");
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return problem("", "MALFORMED_JSON", "The file is not valid UTF-8.");
  }
  if (!text.trimStart().startsWith("[")) return checked(file, "", bytes);
  let parsed: ReturnType<typeof parseStrictJsonText>;
  try {
    parsed = parseStrictJsonText(text);
  } catch (err) {
    return problem("", "MALFORMED_JSON", `The file is not valid JSON: ${err instanceof Error ? err.message : err}.`);
  }
  if (parsed.issues !== undefined) return { definitions: [], problems: parsed.issues.map((i) => asProblem(file, i)) };
  const items = parsed.value as unknown[];
  const all = items.map((item, i) => checked(file, `[${i}]`, encoder.encode(JSON.stringify(item))));
  return { definitions: all.flatMap((r) => r.definitions), problems: all.flatMap((r) => r.problems) };
}

/** One definition's JSON `bytes`, checked as a POST's body is. */
function checked(file: string, at: string, bytes: Uint8Array): ReadFiles {
  const body = checkJsonBody(bytes, AgentDefinitionSchema);
  if (body.problem !== undefined)
    return { definitions: [], problems: body.problem.issues.map((issue) => asProblem(file, issue, at)) };
  try {
    const definition = messageOfCheckedJson(AgentDefinitionSchema, body.value as JsonValue);
    return { definitions: [{ file, at, definition }], problems: [] };
  } catch (err) {
    if (!(err instanceof RegistryError)) throw err;
    return { definitions: [], problems: err.issues.map((issue) => asProblem(file, issue, at)) };
  }
}

/** `issue` of the definition at `at` of `file`, its path made relative to the file. */
export function asProblem(file: string, issue: Issue, at = ""): FileProblem {
  const path = issue.path === undefined || issue.path === "" ? at : at === "" ? issue.path : `${at}.${issue.path}`;
  const message = at === "" || issue.path === undefined ? issue.message : issue.message.replaceAll(issue.path, path);
  return { file, path, code: issue.code, message };
}
