import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { allCodes, ERRORS } from "../../src/domain/errors.js";

describe("the README", () => {
  const readme = readFileSync("README.md", "utf8");
  const codesTable = readme.slice(readme.indexOf("Codes (`code`):"), readme.indexOf("\n## ", readme.indexOf("Codes (`code`):")));
  const documented = new Set([...codesTable.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1]));

  it("documents every error code the service answers with, and no other", () => {
    expect([...documented].sort()).toEqual(Object.keys(allCodes()).sort());
  });

  it("gives each status the gRPC code the error table gives it, and no other pair", () => {
    const statusTable = readme.slice(readme.indexOf("| status | gRPC code | when |"), readme.indexOf("Codes (`code`):"));
    const documented = new Set([...statusTable.matchAll(/^\| (\d{3}) \| ([A-Z_]+) \|/gm)].map((m) => `${m[1]} ${m[2]}`));
    const snake = (name: string) => name.replace(/([a-z])([A-Z])/g, "$1_$2").toUpperCase();
    const table = new Set(Object.values(ERRORS).map((row) => `${row.http} ${snake(row.grpc)}`));
    expect([...documented].sort()).toEqual([...table].sort());
  });
});
