import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ERROR_CODES } from "../../src/domain/error-codes.js";

describe("the README", () => {
  const readme = readFileSync("README.md", "utf8");
  const codesTable = readme.slice(readme.indexOf("Codes (`code`):"), readme.indexOf("\n## ", readme.indexOf("Codes (`code`):")));
  const documented = new Set([...codesTable.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1]));

  it("documents every error code the service answers with, and no other", () => {
    expect([...documented].sort()).toEqual(Object.keys(ERROR_CODES).sort());
  });
});
