/**
 * Identifying text: the strings a definition is known, keyed, filtered and shown by (its name, version,
 * provider.id, skill ids, externalAgentID...), as opposed to free text (descriptions, overviews), which may
 * hold anything Unicode can. Two such strings that look the same to a person must be the same string: they
 * hold no control characters (C0, DEL, C1: NUL, ESC and the terminal escapes they start), no bidirectional
 * formatting characters (U+061C, U+200E-200F, U+202A-202E, U+2066-2069: "guarded" shown reversed), no
 * zero-width characters (U+200B-200D, U+2060, U+FEFF), no line or paragraph separators (U+2028-2029), and
 * no white space before or after them ("guarded " beside "guarded"). Only writes are checked: rows stored
 * before the rule still read (docs/decisions.md, "Issue 50: the small ones").
 */
import type { DescField, DescMessage, Message } from "@bufbuild/protobuf";
import { type AgentDefinition, AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { createIssueCollector, type Issue, issueAt, memberPath } from "./errors.js";

/** The characters identifying text may not hold anywhere (`\p{Cc}`: U+0000-001F and U+007F-009F). */
const REFUSED = /[\p{Cc}\u061c\u200b-\u200f\u2028-\u202e\u2060\u2066-\u2069\ufeff]/u;

/** White space (JavaScript's `\s`: Unicode's White_Space and U+FEFF) at the start, and at the end. */
const LEADING_SPACE = /^\s/;
const TRAILING_SPACE = /\s$/;

/** The JSON paths of a definition's identifying strings, `[]` standing for every item of a list. */
export const IDENTIFYING_PATHS = [
  "id",
  "name",
  "version",
  "provider.id",
  "platform.id",
  "externalAgentID",
  "externalTenantID",
  "defaultInputModes[].type",
  "defaultOutputModes[].type",
  "skills[].id",
  "skills[].name",
  "skills[].tags[].tag",
  "skills[].inputModes[].type",
  "skills[].outputModes[].type",
  "hostConfig[].skillId",
  "hostConfig[].hostResources[].tool_name",
  "hostConfig[].hostResources[].agent_resource.id",
  "hostConfig[].hostResources[].agent_resource.descriptor",
  "hostConfig[].hostResources[].tools[].id",
] as const;

/** What kind of character `c` is, in the words of an issue's message. */
function kindOf(c: number): string {
  if (c <= 0x9f) return "a control character";
  if (c === 0x2028 || c === 0x2029) return "a line or paragraph separator";
  if (c === 0x200b || c === 0x200c || c === 0x200d || c === 0x2060 || c === 0xfeff) return "a zero-width character";
  return "a bidirectional formatting character";
}

const hex = (c: number): string => `U+${c.toString(16).toUpperCase().padStart(4, "0")}`;

/** What is wrong with `value` as identifying text, in words that follow its path; undefined when nothing is. */
export function identifyingTextProblem(value: string): string | undefined {
  const refused = REFUSED.exec(value);
  if (refused !== null) {
    const c = refused[0].charCodeAt(0);
    return (
      `holds ${hex(c)}, ${kindOf(c)}: names and identifiers may not hold control, bidirectional formatting, ` +
      "zero-width or line separator characters."
    );
  }
  const leading = LEADING_SPACE.test(value);
  if (leading || TRAILING_SPACE.test(value)) {
    const c = value.charCodeAt(leading ? 0 : value.length - 1);
    return (
      `${leading ? "begins" : "ends"} with white space (${hex(c)}): names and identifiers may not begin or end ` +
      "with white space."
    );
  }
  return undefined;
}

/** A tree of the identifying paths over a message's fields: a field, and what inside it is identifying. */
interface PathNode {
  readonly field: DescField;
  readonly inside: readonly PathNode[];
}

/** IDENTIFYING_PATHS as a tree over `desc`'s fields (made once; an unknown name is a bug, thrown at load). */
function pathTree(desc: DescMessage, paths: readonly string[]): PathNode[] {
  const byFirst = new Map<string, string[]>();
  for (const path of paths) {
    const dot = path.indexOf(".");
    const first = (dot === -1 ? path : path.slice(0, dot)).replace(/\[\]$/, "");
    const rest = byFirst.get(first) ?? [];
    if (dot !== -1) rest.push(path.slice(dot + 1));
    byFirst.set(first, rest);
  }
  return [...byFirst].map(([name, rest]) => {
    const field = desc.fields.find((f) => f.jsonName === name);
    if (field === undefined) throw new Error(`identifying path: ${desc.typeName} has no member ${name}`);
    const inner = field.fieldKind === "message" || field.fieldKind === "list" ? field.message : undefined;
    return { field, inside: rest.length === 0 || inner === undefined ? [] : pathTree(inner, rest) };
  });
}

const DEFINITION_TREE = pathTree(AgentDefinitionSchema, IDENTIFYING_PATHS);

/**
 * INVALID_CHARACTER issues for each identifying string of `def` (IDENTIFYING_PATHS) that breaks the rule, with
 * paths relative to the definition (`skills[0].tags[1].tag`).
 */
export function identifyingTextIssues(def: AgentDefinition): readonly Issue[] {
  const issues = createIssueCollector();
  const check = (value: unknown, path: string): void => {
    if (typeof value !== "string" || value === "") return;
    const problem = identifyingTextProblem(value);
    if (problem !== undefined) issues.add(() => issueAt(path, "INVALID_CHARACTER", `${path} ${problem}`));
  };
  const visit = (nodes: readonly PathNode[], message: Message, at: string): void => {
    for (const { field, inside } of nodes) {
      const value = (message as unknown as Record<string, unknown>)[field.localName];
      const path = memberPath(at, field.jsonName);
      if (field.fieldKind === "list") {
        (value as unknown[]).forEach((item, i) =>
          inside.length === 0 ? check(item, `${path}[${i}]`) : visit(inside, item as Message, `${path}[${i}]`),
        );
      } else if (field.fieldKind === "message") {
        if (value !== undefined) visit(inside, value as Message, path);
      } else {
        check(value, path);
      }
    }
  };
  visit(DEFINITION_TREE, def, "");
  return issues.issues();
}
