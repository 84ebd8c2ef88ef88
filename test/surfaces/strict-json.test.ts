/**
 * The structural check of JSON bodies (src/surfaces/encoding/strict-json.ts): members named twice, at any depth, with
 * their paths, whether the object has a few members or many, and nesting past MAX_JSON_DEPTH with where it
 * happened. A body without issues answers the one shared empty list.
 */
import { describe, expect, it } from "vitest";
import { NO_ISSUES } from "../../src/domain/errors.js";
import { MAX_JSON_DEPTH, structureIssues } from "../../src/surfaces/encoding/strict-json.js";

const many = (n: number) => Array.from({ length: n }, (_, i) => `"k${i}":${i}`).join(",");

describe("the structure of a JSON body", () => {
  it("names a member given twice by its path, through objects and arrays", () => {
    const text = `{"a":[{"x":1},{"y":{"z":1,"z":2}}],"b":1}`;
    expect(structureIssues(text).map((i) => [i.code, i.path, i.field])).toEqual([["DUPLICATE_KEY", "a[1].y.z", "z"]]);
  });

  it("finds a member given twice in an object of many members, early or late", () => {
    const cases: [string, string][] = [
      [`{${many(20)},"k3":0}`, "k3"],
      [`{${many(7)},"k0":0}`, "k0"],
      [`{"k0":0,${many(20)}}`, "k0"],
    ];
    for (const [text, path] of cases) {
      expect(structureIssues(text).map((i) => [i.code, i.path])).toEqual([["DUPLICATE_KEY", path]]);
    }
  });

  it("tells members of sibling objects apart, and compares names decoded", () => {
    expect(structureIssues(`[{"a":1},{"a":2}]`)).toEqual([]);
    expect(structureIssues(`{"name":1,"n\\u0061me":2}`).map((i) => i.path)).toEqual(["name"]);
  });

  it("says where the nesting went too deep", () => {
    const deep = `{"a":[${"[".repeat(MAX_JSON_DEPTH)}`;
    const [issue] = structureIssues(deep);
    expect(issue?.code).toBe("TOO_DEEP");
    // The object and `a` are two levels: the array refused is the 31st inside `a`'s first item chain.
    expect(issue?.path).toBe(`a${"[0]".repeat(MAX_JSON_DEPTH - 1)}`);
  });

  it("answers the one shared empty list for a body without issues", () => {
    expect(structureIssues(`{"tenant":"t","id":"x","list":[{"a":1},{"b":[1,2]}]}`)).toBe(NO_ISSUES);
  });
});
