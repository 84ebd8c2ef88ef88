import { describe, expect, it } from "vitest";
import { openDatabase } from "../../src/storage/run/connection.js";
import { testDatabases, useFreshDatabase } from "../support/databases.js";

const [sqlite] = testDatabases();

describe("the embedded SQLite database", () => {
  const target = useFreshDatabase(sqlite!);

  it("commits durably: WAL with synchronous=FULL, so an acknowledged write survives a power loss", async () => {
    const { db } = await openDatabase(target());
    try {
      expect(await db.raw("PRAGMA journal_mode")).toEqual([{ journal_mode: "wal" }]);
      // 2 is FULL (0 OFF, 1 NORMAL, 3 EXTRA).
      expect(await db.raw("PRAGMA synchronous")).toEqual([{ synchronous: 2 }]);
    } finally {
      await db.destroy();
    }
  });
});
