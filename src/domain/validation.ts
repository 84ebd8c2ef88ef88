import type { DescMessage, Message, MessageShape } from "@bufbuild/protobuf";
import type { Path } from "@bufbuild/protobuf/reflect";
import { createValidator, type Violation } from "@bufbuild/protovalidate";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type { IssueCode } from "./errors.js";
import { type Issue, invalid, issueAt } from "./errors.js";

const validator = createValidator();

/** protovalidate rule ids -> our codes. Rules not listed become INVALID_VALUE. */
const RULE_CODES: Record<string, IssueCode> = {
  required: "REQUIRED",
  "string.max_len": "TOO_LONG",
  "string.pattern": "PATTERN_MISMATCH",
  "string.uri": "INVALID_URI",
  "string.in": "NOT_ALLOWED",
  "string.const": "NOT_ALLOWED",
  "repeated.max_items": "TOO_MANY",
  "int32.gte_lte": "OUT_OF_RANGE",
  "int32.gte": "OUT_OF_RANGE",
};

/** Clearer words than a regular expression for the patterns of the contract. */
const PATTERN_MESSAGES: Record<string, string> = {
  id: "must be 32 lowercase hex characters, or a reference of the form <key>=<value> without whitespace",
  tenant: "must be 1 to 63 letters, digits, '_', '.' or '-', starting with a letter or digit",
};

/** Formats a protobuf path as the JSON path clients see: `skills[0].tags[1].tag`. */
export function jsonPath(path: Path): string {
  let out = "";
  for (const item of path) {
    if (item.kind === "list_sub") out += `[${item.index}]`;
    else if (item.kind === "map_sub") out += `[${JSON.stringify(String(item.key))}]`;
    else if (item.kind === "field") out += out === "" ? item.jsonName : `.${item.jsonName}`;
    else out += out === "" ? item.name : `.${item.name}`;
  }
  return out;
}

function violationToIssue(v: Violation, prefix: string): Issue {
  const path = prefix + jsonPath(v.field);
  const code = RULE_CODES[v.ruleId] ?? "INVALID_VALUE";
  const last = v.field.at(-1);
  const name = last !== undefined && last.kind === "field" ? last.jsonName : "";
  const words = code === "PATTERN_MISMATCH" ? (PATTERN_MESSAGES[name] ?? v.message) : v.message;
  return issueAt(path, code, `${path} ${words}.`);
}

/** Every rule of the proto (protovalidate) broken by `message`, as issues under `prefix`. */
export function contractIssues<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>, prefix = ""): Issue[] {
  const result = validator.validate(schema, message);
  if (result.kind === "valid") return [];
  if (result.kind === "error") throw result.error;
  return result.violations.map((v) => violationToIssue(v, prefix));
}

/**
 * Members a binary (gRPC) client sent that the contract does not know. JSON
 * decoding rejects unknown keys by itself; protobuf binary keeps them aside,
 * so without this check they would be dropped silently.
 */
export function unknownFieldIssues<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>, prefix = ""): Issue[] {
  const issues: Issue[] = [];
  const visit = (desc: DescMessage, m: Message, at: string): void => {
    for (const u of m.$unknown ?? []) {
      const path = `${at === "" ? "" : `${at}.`}#${u.no}`;
      issues.push({ code: "UNKNOWN_FIELD", message: `${path}: field number ${u.no} is not part of the contract.`, field: `#${u.no}`, path });
    }
    for (const field of desc.fields) {
      const value = (m as unknown as Record<string, unknown>)[field.localName];
      const path = at === "" ? field.jsonName : `${at}.${field.jsonName}`;
      if (field.fieldKind === "message" && value !== undefined) visit(field.message, value as Message, path);
      if (field.fieldKind === "list" && field.listKind === "message") {
        (value as Message[]).forEach((item, i) => visit(field.message, item, `${path}[${i}]`));
      }
    }
  };
  visit(schema, message, prefix);
  return issues;
}

/** The registry's rules across members, which the proto cannot say. */
export function crossFieldIssues(def: AgentDefinition): Issue[] {
  const issues: Issue[] = [];
  const skillIndex = new Map<string, number>();
  def.skills.forEach((skill, i) => {
    if (skill.id === "") return;
    const first = skillIndex.get(skill.id);
    if (first === undefined) skillIndex.set(skill.id, i);
    else issues.push(issueAt(`skills[${i}].id`, "DUPLICATE_SKILL_ID", `skills[${i}].id "${skill.id}" is already the id of skills[${first}].`));
  });
  const configured = new Map<string, number>();
  def.hostConfig.forEach((item, i) => {
    if (item.skillId === "") return;
    const path = `hostConfig[${i}].skillId`;
    if (!skillIndex.has(item.skillId)) {
      issues.push(issueAt(path, "UNKNOWN_SKILL", `${path} "${item.skillId}" names no skill of this definition.`));
    }
    const first = configured.get(item.skillId);
    if (first === undefined) configured.set(item.skillId, i);
    else issues.push(issueAt(path, "DUPLICATE_SKILL_RESOURCE", `${path} "${item.skillId}" is already configured by hostConfig[${first}].`));
  });
  return issues;
}

/** Throws a VALIDATION_FAILED RegistryError listing every issue, if there is any. */
export function assertValid(issues: readonly Issue[]): void {
  if (issues.length > 0) {
    throw invalid(issues, issues.length === 1 ? "The request has 1 invalid member." : `The request has ${issues.length} invalid members.`);
  }
}
