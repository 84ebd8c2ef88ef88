import { createIssueCollector, type Issue, memberPath } from "../domain/errors.js";

/**
 * The deepest nesting of objects and arrays a JSON body may have. The
 * contract's deepest document (a tool inside a host resource inside a
 * `hostConfig` item, inside an RPC request) nests 8 levels.
 */
export const MAX_JSON_DEPTH = 32;

type Frame =
  | {
      readonly kind: "object";
      readonly path: string;
      readonly keys: Set<string>;
      key: string | undefined;
      expectKey: boolean;
    }
  | { readonly kind: "array"; readonly path: string; index: number };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** The path of the value that starts at the current position inside `top`. */
function valuePath(top: Frame | undefined): string {
  if (top === undefined) return "";
  return top.kind === "array" ? `${top.path}[${top.index}]` : memberPath(top.path, top.key ?? "");
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
 * its keys, not an issue each.
 */
export function structureIssues(text: string): readonly Issue[] {
  const issues = createIssueCollector();
  const stack: Frame[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    const top = stack.at(-1);
    if (c === '"') {
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
        if (top.keys.has(key)) {
          const named = key;
          const parent = top.path;
          issues.add(() => {
            const path = memberPath(parent, named);
            return {
              code: "DUPLICATE_KEY",
              message: `${path} is given twice; send each member once.`,
              field: named,
              path,
            };
          });
        }
        top.keys.add(key);
        top.key = key;
        top.expectKey = false;
      }
      i = end;
    } else if (c === "{" || c === "[") {
      const path = valuePath(top);
      if (stack.length + 1 > MAX_JSON_DEPTH) {
        const where = path === "" ? "the body" : path;
        return [
          {
            code: "TOO_DEEP",
            message: `The JSON nests deeper than ${MAX_JSON_DEPTH} objects and arrays at ${where}.`,
            ...(path === "" ? {} : { path }),
          },
        ];
      }
      stack.push(
        c === "{"
          ? { kind: "object", path, keys: new Set(), key: undefined, expectKey: true }
          : { kind: "array", path, index: 0 },
      );
    } else if (c === "}" || c === "]") {
      stack.pop();
    } else if (c === ",") {
      if (top?.kind === "object") top.expectKey = true;
      else if (top?.kind === "array") top.index++;
    }
  }
  return issues.issues();
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
