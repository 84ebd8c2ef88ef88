/**
 * The members of a JSON value checked against a message of the contract:
 * every unknown member and every wrongly typed value, each with its path, not
 * just the first (body-check.ts runs it for REST bodies and RPC messages alike).
 */
import { type DescField, type DescMessage, ScalarType } from "@bufbuild/protobuf";
import { createIssueCollector, type Issue, type IssueCollector, issueAt, memberPath } from "../../domain/errors.js";
import { refusedMemberReason } from "../../domain/tenant-admin.js";

/** A high surrogate not followed by a low one, or a low one not preceded by a high one (code units: no `u` flag). */
const UNPAIRED_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

/** OUT_OF_RANGE when the integer `n` does not fit a protobuf int32 (which would fail deep in encoding otherwise). */
export function int32RangeIssue(n: number, path: string): Issue | undefined {
  if (n >= INT32_MIN && n <= INT32_MAX) return undefined;
  return issueAt(path, "OUT_OF_RANGE", `${path} must be from ${INT32_MIN} to ${INT32_MAX}.`);
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

function scalarIssue(type: ScalarType, value: unknown, path: string): Issue | undefined {
  switch (type) {
    case ScalarType.STRING:
      if (typeof value !== "string")
        return issueAt(path, "INVALID_TYPE", `${path} must be a string, not ${describe(value)}.`);
      // `"\ud800"` is valid JSON but no character: UTF-8 cannot hold it, so it could only be stored mangled.
      return UNPAIRED_SURROGATE.test(value)
        ? issueAt(path, "INVALID_UNICODE", `${path} is not well-formed Unicode: it has an unpaired surrogate.`)
        : undefined;
    case ScalarType.BOOL:
      return typeof value === "boolean"
        ? undefined
        : issueAt(path, "INVALID_TYPE", `${path} must be true or false, not ${describe(value)}.`);
    case ScalarType.INT32: {
      const n = typeof value === "string" && /^-?\d+$/.test(value) ? Number(value) : value;
      if (typeof n !== "number" || !Number.isInteger(n))
        return issueAt(path, "INVALID_TYPE", `${path} must be a 32-bit integer.`);
      return int32RangeIssue(n, path);
    }
    default:
      return undefined;
  }
}

/** How strictly member names are matched. */
export interface DecodeOptions {
  /** Also accept the proto names (`external_agent_id`), as Connect JSON does. REST takes only the JSON names. */
  readonly protoNames?: boolean;
}

function valueIssues(
  field: DescField,
  value: unknown,
  path: string,
  issues: IssueCollector,
  options: DecodeOptions,
): void {
  if (field.fieldKind === "message") {
    objectIssues(field.message, value, path, issues, options);
  } else if (field.fieldKind === "scalar") {
    const issue = scalarIssue(field.scalar, value, path);
    if (issue) issues.add(issue);
  } else if (field.fieldKind === "enum") {
    // protobuf JSON names an enum value by its name (or its number); anything else, named here.
    const known =
      typeof value === "string"
        ? field.enum.values.some((v) => v.name === value)
        : typeof value === "number" && field.enum.values.some((v) => v.number === value);
    if (!known) {
      const names = field.enum.values.filter((v) => v.number !== 0).map((v) => v.name);
      issues.add(
        issueAt(
          path,
          "NOT_ALLOWED",
          `${path} must be one of ${names.join(", ")}, ` +
            `not ${typeof value === "string" ? JSON.stringify(value) : describe(value)}.`,
        ),
      );
    }
  } else if (field.fieldKind === "list") {
    if (!Array.isArray(value)) {
      issues.add(issueAt(path, "INVALID_TYPE", `${path} must be an array, not ${describe(value)}.`));
      return;
    }
    value.forEach((item, i) => {
      const at = `${path}[${i}]`;
      if (field.listKind === "message") objectIssues(field.message, item, at, issues, options);
      else if (field.listKind === "scalar") {
        const issue = scalarIssue(field.scalar, item, at);
        if (issue) issues.add(issue);
      }
    });
  }
}

function objectIssues(
  desc: DescMessage,
  value: unknown,
  path: string,
  issues: IssueCollector,
  options: DecodeOptions,
): void {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    const where = path === "" ? "The body" : path;
    issues.add(issueAt(path, "INVALID_TYPE", `${where} must be a JSON object, not ${describe(value)}.`));
    return;
  }
  for (const key of Object.keys(value)) {
    const member = (value as Record<string, unknown>)[key];
    const field = desc.fields.find((f) => f.jsonName === key || (options.protoNames === true && f.name === key));
    if (field === undefined) {
      // Built only while the collector keeps issues: past its cap an unknown member is only counted.
      issues.add(() => {
        const at = memberPath(path, key);
        const near = desc.fields.find((f) => f.name === key || f.jsonName.toLowerCase() === key.toLowerCase());
        const hint = near ? ` Did you mean "${near.jsonName}"?` : "";
        const reason = refusedMemberReason(desc.typeName, key);
        return {
          code: "UNKNOWN_FIELD",
          message:
            reason === undefined ? `${at} is not a member of ${desc.name}.${hint}` : `${at} is refused: ${reason}.`,
          field: key,
          path: at,
        };
      });
    } else if (member !== null) {
      const at = memberPath(path, key);
      valueIssues(field, member, at, issues, options);
    }
  }
}

/** Every unknown member and wrongly typed value of the JSON of a message, with its path; empty when it decodes. */
export function jsonIssues(desc: DescMessage, json: unknown, path = "", options: DecodeOptions = {}): readonly Issue[] {
  const issues = createIssueCollector();
  objectIssues(desc, json, path, issues, options);
  return issues.issues();
}
