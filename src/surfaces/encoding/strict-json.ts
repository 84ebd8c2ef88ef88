import { createIssueCollector, type Issue, type IssueCollector, memberPath, NO_ISSUES } from "../../domain/errors.js";

/**
 * The deepest nesting of objects and arrays a JSON body may have. The
 * contract's deepest document (a tool inside a host resource inside a
 * `hostConfig` item, inside an RPC request) nests 8 levels.
 */
export const MAX_JSON_DEPTH = 32;

/**
 * An object or array open at the current position: where it sits in its parent (`at`, a member's name or an
 * item's index; the path is built from the chain only when an issue needs it), and what it has seen.
 */
type Frame =
  | {
      readonly kind: "object";
      readonly parent: Frame | undefined;
      readonly at: string | number | undefined;
      /** Its members' names so far: a list while it is short, a set past SHORT_OBJECT. */
      keys: string[] | Set<string>;
      key: string | undefined;
      expectKey: boolean;
    }
  | {
      readonly kind: "array";
      readonly parent: Frame | undefined;
      readonly at: string | number | undefined;
      index: number;
    };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b; // {
const CLOSE_OBJECT = 0x7d; // }
const OPEN_ARRAY = 0x5b; // [
const CLOSE_ARRAY = 0x5d; // ]
const COMMA = 0x2c;
/** Members an object's names are kept in a list for (a linear search beats a Set's allocation). */
const SHORT_OBJECT = 8;

/** Where the value that starts at the current position inside `top` sits in it. */
function positionIn(top: Frame | undefined): string | number | undefined {
  if (top === undefined) return undefined;
  return top.kind === "array" ? top.index : (top.key ?? "");
}

/** The path of `frame` itself ("" for the body). */
function pathOf(frame: Frame | undefined): string {
  if (frame === undefined || frame.at === undefined) return "";
  const parent = pathOf(frame.parent);
  return typeof frame.at === "number" ? `${parent}[${frame.at}]` : memberPath(parent, frame.at);
}

/** Whether `top` has seen a member named `key`, which it now has. */
function seenBefore(top: Frame & { kind: "object" }, key: string): boolean {
  const { keys } = top;
  if (keys instanceof Set) {
    if (keys.has(key)) return true;
    keys.add(key);
    return false;
  }
  if (keys.includes(key)) return true;
  keys.push(key);
  if (keys.length > SHORT_OBJECT) top.keys = new Set(keys);
  return false;
}

/** The index of the quote that closes the string opening at `start`, or -1. */
function stringEnd(text: string, start: number): number {
  for (let i = start + 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === BACKSLASH) i++;
    else if (c === QUOTE) return i;
  }
  return -1;
}

/**
 * What JSON.parse lets through and the registry refuses: a member named twice
 * in one object (JSON.parse silently keeps the last, so what the client meant
 * is unknowable), and nesting deeper than MAX_JSON_DEPTH. One pass without
 * recursion, so no input can exhaust the stack. Stops quietly at a syntax
 * error: JSON.parse reports those better. Past the collector's cap duplicates
 * are only counted, so a body of one key repeated costs one pass and a set of
 * its keys, not an issue each. A body without issues makes no collector and no
 * path (every request's body passes here).
 */
export function structureIssues(text: string): readonly Issue[] {
  let issues: IssueCollector | undefined;
  const stack: Frame[] = [];
  let top: Frame | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = stringEnd(text, i);
      if (end === -1) break;
      if (top?.kind === "object" && top.expectKey) {
        // Only a key with an escape needs decoding; the rest are their own text.
        let key = text.slice(i + 1, end);
        if (key.includes("\\")) {
          try {
            key = JSON.parse(text.slice(i, end + 1)) as string;
          } catch {
            break;
          }
        }
        // Keys compare decoded: "name" and "n\u0061me" are the same member.
        if (seenBefore(top, key)) {
          const named = key;
          const parent = top;
          (issues ??= createIssueCollector()).add(() => {
            const path = memberPath(pathOf(parent), named);
            return {
              code: "DUPLICATE_KEY",
              message: `${path} is given twice; send each member once.`,
              field: named,
              path,
            };
          });
        }
        top.key = key;
        top.expectKey = false;
      }
      i = end;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      const at = positionIn(top);
      if (stack.length + 1 > MAX_JSON_DEPTH) {
        const path = at === undefined ? "" : pathOf({ kind: "array", parent: top, at, index: 0 });
        const where = path === "" ? "the body" : path;
        return [
          {
            code: "TOO_DEEP",
            message: `The JSON nests deeper than ${MAX_JSON_DEPTH} objects and arrays at ${where}.`,
            ...(path === "" ? {} : { path }),
          },
        ];
      }
      top =
        c === OPEN_OBJECT
          ? { kind: "object", parent: top, at, keys: [], key: undefined, expectKey: true }
          : { kind: "array", parent: top, at, index: 0 };
      stack.push(top);
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      stack.pop();
      top = stack.at(-1);
    } else if (c === COMMA) {
      if (top?.kind === "object") top.expectKey = true;
      else if (top?.kind === "array") top.index++;
    }
  }
  return issues?.issues() ?? NO_ISSUES;
}

/**
 * The value of JSON text, or its structural issues (duplicate members,
 * nesting). A syntax error is thrown as JSON.parse throws it.
 */
export function parseStrictJsonText(
  text: string,
): { value: unknown; issues?: undefined } | { value?: undefined; issues: readonly Issue[] } {
  const issues = structureIssues(text);
  return issues.length > 0 ? { issues } : { value: JSON.parse(text) };
}
