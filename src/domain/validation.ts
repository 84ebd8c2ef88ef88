import {
  create,
  type DescField,
  type DescMessage,
  getOption,
  type Message,
  type MessageShape,
} from "@bufbuild/protobuf";
import type { Path } from "@bufbuild/protobuf/reflect";
import { createValidator, type Violation } from "@bufbuild/protovalidate";
import { field as fieldRules } from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type { IssueCode } from "./errors.js";
import {
  createIssueCollector,
  type Issue,
  type IssueCollector,
  invalid,
  issueAt,
  memberPath,
  NO_ISSUES,
  problemsMessage,
} from "./errors.js";

const validator = createValidator();
/** Finds whether a message is valid at all, stopping at its first violation. */
const firstViolation = createValidator({ failFast: true });

/**
 * How many list items of an invalid message are validated in full to list its
 * problems. Every violation costs protovalidate a few microseconds and half a
 * kilobyte: a 1 MB body of 300,000 empty skills made 900,000 of them (4 s,
 * 500 MB) without this bound.
 */
const LISTED_ITEMS_BUDGET = 1000;

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

/** The `repeated.max_items` rule of each list field read so far (reading an option decodes it). */
const maxItemsCache = new WeakMap<DescField, number | undefined>();

/** The `repeated.max_items` rule of a list field, if it has one. */
function maxItemsOf(field: DescField): number | undefined {
  if (maxItemsCache.has(field)) return maxItemsCache.get(field);
  const rules = getOption(field, fieldRules);
  const max =
    rules.type.case === "repeated" && rules.type.value.maxItems !== undefined && rules.type.value.maxItems > 0n
      ? Number(rules.type.value.maxItems)
      : undefined;
  maxItemsCache.set(field, max);
  return max;
}

/**
 * A copy of `message` small enough to validate in full: each list of messages
 * cut to its `max_items` (the excess is reported here, as protovalidate
 * would), and once LISTED_ITEMS_BUDGET items have been kept, every further
 * list to its first item (so a required list stays non-empty). Only for a
 * message already known to be invalid: what is cut away goes unchecked.
 */
function boundedCopy(
  desc: DescMessage,
  message: Message,
  at: string,
  issues: IssueCollector,
  budget: { left: number },
): Message {
  const copy = create(desc) as unknown as Record<string, unknown>;
  const source = message as unknown as Record<string, unknown>;
  for (const field of desc.fields) {
    const value = source[field.localName];
    const path = memberPath(at, field.jsonName);
    if (field.fieldKind === "list" && field.listKind === "message") {
      const items = value as Message[];
      const max = maxItemsOf(field);
      if (max !== undefined && items.length > max)
        issues.add(issueAt(path, "TOO_MANY", `${path} must contain no more than ${max} item(s).`));
      const within = max === undefined ? items.length : Math.min(items.length, max);
      const keep = Math.min(within, Math.max(1, budget.left));
      if (keep < within) issues.stoppedEarly();
      budget.left -= keep;
      copy[field.localName] = items
        .slice(0, keep)
        .map((item, i) => boundedCopy(field.message, item, `${path}[${i}]`, issues, budget));
    } else if (field.fieldKind === "message" && value !== undefined) {
      copy[field.localName] = boundedCopy(field.message, value as Message, path, issues, budget);
    } else if (field.oneof !== undefined) {
      copy[field.oneof.localName] = source[field.oneof.localName];
    } else {
      copy[field.localName] = value;
    }
  }
  return copy as unknown as Message;
}

/**
 * Whether `message` has a list of messages over its `max_items`, or more list items than LISTED_ITEMS_BUDGET
 * in all.
 */
function needsBounding(desc: DescMessage, message: Message, budget: { left: number }): boolean {
  const source = message as unknown as Record<string, unknown>;
  for (const field of desc.fields) {
    const value = source[field.localName];
    if (field.fieldKind === "list" && field.listKind === "message") {
      const items = value as Message[];
      const max = maxItemsOf(field);
      budget.left -= items.length;
      if ((max !== undefined && items.length > max) || budget.left < 0) return true;
      if (items.some((item) => needsBounding(field.message, item, budget))) return true;
    } else if (
      field.fieldKind === "message" &&
      value !== undefined &&
      needsBounding(field.message, value as Message, budget)
    ) {
      return true;
    }
  }
  return false;
}

/**
 * Every rule of the proto (protovalidate) broken by `message`, as issues under
 * `prefix`. A valid message is validated once, in full; an invalid one is
 * listed from a bounded copy (boundedCopy), so a body of many broken items
 * costs a bounded number of violations, not one each.
 */
export function contractIssues<Desc extends DescMessage>(
  schema: Desc,
  message: MessageShape<Desc>,
  prefix = "",
): readonly Issue[] {
  const first = firstViolation.validate(schema, message);
  if (first.kind === "valid") return NO_ISSUES;
  if (first.kind === "error") throw first.error;
  const issues = createIssueCollector();
  const bounded = needsBounding(schema, message as Message, { left: LISTED_ITEMS_BUDGET });
  const copy = bounded
    ? (boundedCopy(schema, message as Message, prefix.replace(/\.$/, ""), issues, {
        left: LISTED_ITEMS_BUDGET,
      }) as MessageShape<Desc>)
    : message;
  const result = validator.validate(schema, copy);
  if (result.kind === "error") throw result.error;
  const violations = result.kind === "invalid" ? result.violations : [];
  // The cut-away part held the first violation: it is still listed.
  if (violations.length === 0 && issues.count === 0)
    issues.addAll(first.violations.map((v) => violationToIssue(v, prefix)));
  for (const v of violations) issues.add(() => violationToIssue(v, prefix));
  return issues.issues();
}

/**
 * Members a binary (gRPC) client sent that the contract does not know. JSON
 * decoding rejects unknown keys by itself; protobuf binary keeps them aside,
 * so without this check they would be dropped silently.
 */
export function unknownFieldIssues<Desc extends DescMessage>(
  schema: Desc,
  message: MessageShape<Desc>,
  prefix = "",
): readonly Issue[] {
  // A message without any (nearly every request; never a JSON one) is walked once without a path or a list.
  if (!hasUnknownFields(schema, message)) return NO_ISSUES;
  let issues: IssueCollector | undefined;
  const visit = (desc: DescMessage, m: Message, at: string): void => {
    for (const u of m.$unknown ?? []) {
      issues ??= createIssueCollector();
      issues.add(() => {
        const path = memberPath(at, `#${u.no}`);
        return {
          code: "UNKNOWN_FIELD",
          message: `${path}: field number ${u.no} is not part of the contract.`,
          field: `#${u.no}`,
          path,
        };
      });
    }
    for (const field of desc.fields) {
      // The path is made only for the members that hold messages (a request's scalars make none).
      if (field.fieldKind === "message") {
        const value = (m as unknown as Record<string, unknown>)[field.localName];
        if (value !== undefined) visit(field.message, value as Message, memberPath(at, field.jsonName));
      } else if (field.fieldKind === "list" && field.listKind === "message") {
        const items = (m as unknown as Record<string, unknown>)[field.localName] as Message[];
        if (items.length === 0) continue;
        const path = memberPath(at, field.jsonName);
        items.forEach((item, i) => visit(field.message, item, `${path}[${i}]`));
      }
    }
  };
  visit(schema, message, prefix);
  return issues?.issues() ?? NO_ISSUES;
}

/** Whether `m` or any message inside it kept unknown fields (a walk that allocates nothing). */
function hasUnknownFields(desc: DescMessage, m: Message): boolean {
  if (m.$unknown !== undefined && m.$unknown.length > 0) return true;
  for (const field of desc.fields) {
    if (field.fieldKind === "message") {
      const value = (m as unknown as Record<string, unknown>)[field.localName];
      if (value !== undefined && hasUnknownFields(field.message, value as Message)) return true;
    } else if (field.fieldKind === "list" && field.listKind === "message") {
      const items = (m as unknown as Record<string, unknown>)[field.localName] as Message[];
      for (let i = 0; i < items.length; i++) if (hasUnknownFields(field.message, items[i] as Message)) return true;
    }
  }
  return false;
}

/** The registry's rules across members, which the proto cannot say. */
export function crossFieldIssues(def: AgentDefinition): readonly Issue[] {
  const issues = createIssueCollector();
  const skillIndex = new Map<string, number>();
  def.skills.forEach((skill, i) => {
    if (skill.id === "") return;
    const first = skillIndex.get(skill.id);
    if (first === undefined) skillIndex.set(skill.id, i);
    else
      issues.add(() =>
        issueAt(
          `skills[${i}].id`,
          "DUPLICATE_SKILL_ID",
          `skills[${i}].id "${skill.id}" is already the id of skills[${first}].`,
        ),
      );
  });
  const configured = new Map<string, number>();
  def.hostConfig.forEach((item, i) => {
    if (item.skillId === "") return;
    const path = `hostConfig[${i}].skillId`;
    if (!skillIndex.has(item.skillId)) {
      issues.add(() => issueAt(path, "UNKNOWN_SKILL", `${path} "${item.skillId}" names no skill of this definition.`));
    }
    const first = configured.get(item.skillId);
    if (first === undefined) configured.set(item.skillId, i);
    else
      issues.add(() =>
        issueAt(
          path,
          "DUPLICATE_SKILL_RESOURCE",
          `${path} "${item.skillId}" is already configured by hostConfig[${first}].`,
        ),
      );
  });
  return issues.issues();
}

/** Throws a VALIDATION_FAILED RegistryError listing every issue (up to MAX_ISSUES), if there is any. */
export function assertValid(issues: readonly Issue[]): void {
  if (issues.length > 0) throw invalid(issues, problemsMessage(issues));
}
