/**
 * The issues of an invalid request, one per problem with one member: their shape, their bounds (how many, how
 * long), and the collector the checks gather them in. An error lists them (errors.ts).
 */
import type { IssueCode } from "./error-codes.js";

/** One problem with one member of the request. */
export interface Issue {
  /** Stable code, e.g. `REQUIRED`, `A3015`. */
  readonly code: IssueCode;
  /** What is wrong, for humans. */
  readonly message: string;
  /** The member's name (its JSON name), e.g. `tag`. */
  readonly field?: string;
  /** The member's JSON path, e.g. `skills[0].tags[1].tag`. */
  readonly path?: string;
  /**
   * Only on the MORE_ISSUES item that ends a capped list: how many problems
   * it stands for, and whether that is a lower bound (checking stopped early).
   */
  readonly omitted?: { readonly count: number; readonly atLeast: boolean };
}

/**
 * The most items an error's `errors` lists. A broken body can hold hundreds
 * of thousands of problems (a 1 MB body of one key repeated); past this many
 * only a count is kept, so building, holding and answering them stays small.
 */
export const MAX_ISSUES = 100;

/** The most characters of an issue's message, path or field; longer ones are cut (they quote the client's input). */
const MAX_ISSUE_TEXT = 256;

/**
 * The most UTF-8 bytes the listed issues take together, so every error answer stays small (Connect sends them
 * twice, binary and JSON).
 */
const MAX_ISSUE_BYTES = 16 * 1024;

/** The UTF-8 length of `text`, without encoding it (a surrogate pair counts 6, a little over its 4). */
function utf8Length(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
  }
  return bytes;
}

function cut(text: string): string {
  if (text.length <= MAX_ISSUE_TEXT) return text;
  // Never between the two halves of a surrogate pair: half a character is not Unicode.
  const end = /[\ud800-\udbff]/.test(text.charAt(MAX_ISSUE_TEXT - 4)) ? MAX_ISSUE_TEXT - 4 : MAX_ISSUE_TEXT - 3;
  return `${text.slice(0, end)}...`;
}

/**
 * Where every path collects its issues: it keeps up to MAX_ISSUES (within
 * MAX_ISSUE_BYTES) and only counts the rest; an issue given as a function is
 * built only when it is kept, so checking on past the cap stays cheap. A MORE_ISSUES item added (a list
 * capped elsewhere) adds its count. The one place issues are capped: a list a
 * collector made is not capped again, and RegistryError runs any other list
 * through one (capIssues).
 */
export interface IssueCollector {
  /** How many problems were added, kept or not (a lower bound once checking stopped early). */
  readonly count: number;
  /** Adds an issue; give a function to build it only when it is kept. */
  add(issue: Issue | (() => Issue)): void;
  addAll(issues: Iterable<Issue>): IssueCollector;
  /** Says that checking stopped early: more problems may exist than were counted. */
  stoppedEarly(): void;
  /**
   * The kept issues; when any were left out, the last gives way to a MORE_ISSUES item, so never more than
   * MAX_ISSUES.
   */
  issues(): readonly Issue[];
}

/** A new, empty IssueCollector: one per list of issues (a body, a message, a check). */
export function createIssueCollector(): IssueCollector {
  return new Collector();
}

/**
 * The IssueCollector: a class, its methods shared (every request makes a few, nearly all of which find
 * nothing; an object literal of closures and a getter was made anew for each).
 */
class Collector implements IssueCollector {
  #kept: Issue[] = [];
  #bytes = 0;
  #omitted = 0;
  #atLeast = false;

  get count(): number {
    return this.#kept.length + this.#omitted;
  }
  add(issue: Issue | (() => Issue)): void {
    if (typeof issue !== "function" && issue.omitted !== undefined) {
      this.#omitted += issue.omitted.count;
      this.#atLeast ||= issue.omitted.atLeast;
      return;
    }
    if (this.#kept.length >= MAX_ISSUES || this.#bytes >= MAX_ISSUE_BYTES) {
      this.#omitted++;
      return;
    }
    const made = typeof issue === "function" ? issue() : issue;
    const item: Issue = {
      code: made.code,
      message: cut(made.message),
      ...(made.field === undefined ? {} : { field: cut(made.field) }),
      ...(made.path === undefined ? {} : { path: cut(made.path) }),
    };
    this.#kept.push(item);
    this.#bytes += utf8Length(item.message) + utf8Length(item.field ?? "") + utf8Length(item.path ?? "") + 64;
  }
  addAll(issues: Iterable<Issue>): IssueCollector {
    for (const issue of issues) this.add(issue);
    return this;
  }
  stoppedEarly(): void {
    this.#atLeast = true;
  }
  issues(): readonly Issue[] {
    // Nothing found, the common case: one shared list, so a check that finds nothing leaves nothing behind.
    if (this.#kept.length === 0 && this.#omitted === 0 && !this.#atLeast) return NO_ISSUES;
    // Frozen: a list capped once stays as it was capped.
    const made = Object.freeze(this.#collected());
    capped.add(made);
    return made;
  }
  #collected(): Issue[] {
    const kept = this.#kept;
    const omitted = this.#omitted;
    const atLeast = this.#atLeast;
    if (omitted === 0 && !atLeast) return [...kept];
    const listed = kept.slice(0, MAX_ISSUES - 1);
    const count = omitted + kept.length - listed.length;
    const leftOut = count === 0 ? "more problems may exist" : `at least ${count} more problems were left out`;
    const message = atLeast
      ? `Checking stopped early: ${leftOut}; fix the ones listed and send the request again.`
      : `${count} more ${count === 1 ? "problem was" : "problems were"} left out; ` +
        "fix the ones listed and send the request again.";
    return [...listed, { code: "MORE_ISSUES", message, omitted: { count, atLeast } }];
  }
}

/** The lists collectors made: capped already. */
const capped = new WeakSet<readonly Issue[]>();

/** What a collector that found nothing answers: one frozen list for all of them. */
export const NO_ISSUES: readonly Issue[] = Object.freeze([]);
capped.add(NO_ISSUES);

/** How many problems `issues` stands for: its items, a MORE_ISSUES item counted as the problems it left out. */
export function problemCount(issues: readonly Issue[]): number {
  return issues.reduce((n, i) => n + (i.omitted === undefined ? 1 : i.omitted.count), 0);
}

/**
 * The one summary of a list of problems, whoever found them (a body's JSON, the
 * contract's rules, the service's): the problem itself when there is one,
 * else "The request has N problems.", N counting the problems left out too.
 */
export function problemsMessage(issues: readonly Issue[]): string {
  const [only] = issues;
  if (issues.length === 1 && only !== undefined && only.omitted === undefined) return only.message;
  return `The request has ${problemCount(issues)} problems.`;
}

/** `issues` capped as IssueCollector caps them: as they are when a collector made them. */
export function capIssues(issues: readonly Issue[]): readonly Issue[] {
  return issues.length === 0 || capped.has(issues) ? issues : createIssueCollector().addAll(issues).issues();
}
