import { describe, expect, it } from "vitest";
import {
  capIssues,
  createIssueCollector,
  type Issue,
  invalid,
  MAX_ISSUES,
  problemCount,
  problemsMessage,
} from "../../src/domain/errors.js";
import { parseListQuery } from "../../src/domain/list-query.js";

const issue = (i: number): Issue => ({
  code: "UNKNOWN_FIELD",
  message: `x${i} is not a member.`,
  field: `x${i}`,
  path: `x${i}`,
});

describe("the issue cap", () => {
  it("keeps every issue up to 100", () => {
    const issues = createIssueCollector()
      .addAll(Array.from({ length: MAX_ISSUES }, (_, i) => issue(i)))
      .issues();
    expect(issues).toHaveLength(100);
    expect(issues.at(-1)).toEqual(issue(99));
  });

  it("past 100, lists 99 and a last MORE_ISSUES item saying how many were left out", () => {
    const issues = createIssueCollector()
      .addAll(Array.from({ length: 170_000 }, (_, i) => issue(i)))
      .issues();
    expect(issues).toHaveLength(100);
    expect(issues[98]).toEqual(issue(98));
    expect(issues[99]).toMatchObject({
      code: "MORE_ISSUES",
      message: "169901 more problems were left out; fix the ones listed and send the request again.",
    });
    expect(problemCount(issues)).toBe(170_000);
    expect(problemsMessage(issues)).toBe("The request has 170000 problems.");
  });

  it("builds an issue given as a function only while it is kept", () => {
    const collector = createIssueCollector();
    let built = 0;
    for (let i = 0; i < 1000; i++)
      collector.add(() => {
        built++;
        return issue(i);
      });
    expect(built).toBe(100);
    expect(collector.count).toBe(1000);
  });

  it("merges capped lists, adding their counts, and says 'at least' when checking stopped early", () => {
    const first = createIssueCollector()
      .addAll(Array.from({ length: 150 }, (_, i) => issue(i)))
      .issues();
    const second = createIssueCollector();
    second.add(issue(1000));
    second.stoppedEarly();
    const merged = capIssues([...first, ...second.issues()]);
    expect(merged).toHaveLength(100);
    expect(problemCount(merged)).toBe(151);
    expect(merged.at(-1)?.message).toBe(
      "Checking stopped early: at least 52 more problems were left out; fix the ones listed and send the request " +
        "again.",
    );
  });

  it("cuts each text at 256 characters (between characters) and bounds the bytes of the whole list", () => {
    const long = "\u{1F600}".repeat(10_000);
    const issues = createIssueCollector()
      .addAll(
        Array.from({ length: 100 }, () => ({ code: "UNKNOWN_FIELD" as const, message: long, field: long, path: long })),
      )
      .issues();
    const message = issues[0]?.message ?? "";
    expect(message.length).toBeLessThanOrEqual(256);
    expect(message.endsWith("\u{1F600}...")).toBe(true); // cut between characters, never inside one
    expect(issues.length).toBeLessThan(100);
    expect(new TextEncoder().encode(JSON.stringify(issues)).byteLength).toBeLessThan(24 * 1024);
    expect(issues.at(-1)?.code).toBe("MORE_ISSUES");
  });

  it("is applied to every RegistryError, however its issues were gathered", () => {
    expect(invalid(Array.from({ length: 500 }, (_, i) => issue(i))).issues).toHaveLength(100);
  });
});

describe("the summary of a VALIDATION_FAILED", () => {
  it("is the problem itself, or 'The request has N problems.', when no other message is given", () => {
    expect(invalid([issue(1)]).message).toBe("x1 is not a member.");
    expect(invalid([issue(1), issue(2)]).message).toBe("The request has 2 problems.");
  });

  it("is worded so for a list's query parameters too", () => {
    const none = { name: [], provider: [], platform: [], version: [], tag: [], skillId: [] };
    const rest = { executionMode: [], resource: [], externalAgentId: [], status: [] };
    expect(() =>
      parseListQuery("default", { limit: 20, ...none, ...rest, orderBy: "size", updatedSince: "yesterday" }),
    ).toThrow("The request has 2 problems.");
  });
});
