import { describe, expect, it } from "vitest";
import { RegistryError } from "../../src/domain/errors.js";
import {
  checkCreateOnly,
  checkIfMatch,
  checkKeyKept,
  etagOf,
  ifMatchHolds,
  ifNoneMatchMatches,
  parseEntityTags,
} from "../../src/domain/lifecycle.js";

const version = { id: "0123456789abcdef0123456789abcdef", revision: 3 };
const etag = `"${version.id}-3"`;

describe("entity tags", () => {
  it("make a strong tag of the id and the revision", () => {
    expect(etagOf(version)).toBe(etag);
    expect(etagOf({ ...version, revision: 4 })).not.toBe(etag);
  });

  it("parse *, lists, weak tags, and bare tags as quoted ones", () => {
    expect(parseEntityTags(" * ")).toBe("*");
    expect(parseEntityTags(`"a", W/"b" ,"c"`)).toEqual([`"a"`, `W/"b"`, `"c"`]);
    expect(parseEntityTags(`${version.id}-3`)).toEqual([etag]);
    expect(parseEntityTags("")).toEqual([]);
  });

  it("If-Match compares strongly: a weak tag or an absent version never matches", () => {
    expect(ifMatchHolds(parseEntityTags(etag), version)).toBe(true);
    expect(ifMatchHolds(parseEntityTags(`"x", ${etag}`), version)).toBe(true);
    expect(ifMatchHolds(parseEntityTags(`W/${etag}`), version)).toBe(false);
    expect(ifMatchHolds("*", version)).toBe(true);
    expect(ifMatchHolds("*", undefined)).toBe(false);
  });

  it("If-None-Match compares weakly", () => {
    expect(ifNoneMatchMatches(parseEntityTags(`W/${etag}`), etag)).toBe(true);
    expect(ifNoneMatchMatches(parseEntityTags(`"${version.id}-2"`), etag)).toBe(false);
    expect(ifNoneMatchMatches("*", etag)).toBe(true);
  });
});

describe("write conditions", () => {
  const codeOf = (fn: () => void) => {
    try {
      fn();
      return "ok";
    } catch (err) {
      return err instanceof RegistryError ? `${err.code} ${err.issues[0]?.field}` : "other";
    }
  };

  it("an empty etag is no condition; a stale one is PRECONDITION_FAILED naming etag", () => {
    expect(codeOf(() => checkIfMatch("", undefined, "x"))).toBe("ok");
    expect(codeOf(() => checkIfMatch(etag, version, "x"))).toBe("ok");
    expect(codeOf(() => checkIfMatch(`"${version.id}-2"`, version, "x"))).toBe("PRECONDITION_FAILED etag");
    expect(codeOf(() => checkIfMatch("*", undefined, "x"))).toBe("PRECONDITION_FAILED etag");
  });

  it("create-only fails on an existing version only", () => {
    expect(codeOf(() => checkCreateOnly(true, undefined))).toBe("ok");
    expect(codeOf(() => checkCreateOnly(false, version))).toBe("ok");
    expect(codeOf(() => checkCreateOnly(true, version))).toBe("PRECONDITION_FAILED createOnly");
  });

  it("KEY_CHANGED names each member of the key that would change", () => {
    const own = { name: "A", providerId: "Provider=A", version: "1" };
    expect(codeOf(() => checkKeyKept(own, own))).toBe("ok");
    try {
      checkKeyKept({ name: "B", providerId: "Provider=B", version: "1" }, own);
      throw new Error("expected KEY_CHANGED");
    } catch (err) {
      expect((err as RegistryError).code).toBe("KEY_CHANGED");
      expect((err as RegistryError).issues.map((i) => [i.code, i.field, i.path])).toEqual([
        ["KEY_CHANGED", "name", "name"],
        ["KEY_CHANGED", "id", "provider.id"],
      ]);
    }
  });
});
