import { describe, expect, it } from "vitest";
import { growsHeap } from "../../src/main/heap-growth.js";

describe("the heap's growth between full collections", () => {
  const mysql = "mysql://registry@db:3306/registry";

  it("is set on a database server", () => {
    expect(growsHeap(mysql, ["--max-old-space-size=128", "--max-semi-space-size=2"])).toBe(true);
  });

  it("is left to V8 on the embedded database, which lives in the process", () => {
    expect(growsHeap(undefined, [])).toBe(false);
  });

  it("is left to the command line when it names the flag, in either spelling", () => {
    expect(growsHeap(mysql, ["--heap-growing-percent=50"])).toBe(false);
    expect(growsHeap(mysql, ["--heap_growing_percent=0"])).toBe(false);
    expect(growsHeap(mysql, ["--heap-growing-percent-x=1"])).toBe(true);
  });
});
