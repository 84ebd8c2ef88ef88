/**
 * A read by id, and the readiness probe, are not held up by another tenant's write transaction (issue 50, item 3).
 * On SQLite the reads shared the one connection of the writes and waited for each transaction whole: a ~1 MB
 * definition's write held another tenant's GET 0.3-2 s (bench/large-writes.ts). They now have a connection of their
 * own, which in WAL mode reads the last commit beside the writer. On MySQL the pool has always had more than one
 * connection.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentDefinitionRepository } from "../../src/storage/repository.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { forEachDatabase, useFreshDatabase } from "../support/databases.js";
import { definition, save } from "./fixtures.js";

forEachDatabase((db) => {
  const target = useFreshDatabase(db);
  let repo: AgentDefinitionRepository;

  beforeAll(async () => {
    repo = await createSqlRepository(target());
    await repo.createTenant("writing", "W-");
  });
  afterAll(async () => {
    await repo?.close();
  });

  describe("reads beside a write", () => {
    it("answers a read by id and the probe while another tenant's write is open", async () => {
      const stored = (await save(repo, definition({ name: "Read beside" }))).stored;
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let inside!: () => void;
      const entered = new Promise<void>((resolve) => {
        inside = resolve;
      });
      // A write that stops inside its transaction, after its first statement, until released.
      const writing = save(repo, definition({ name: "Held open" }), "writing", {
        after: async () => {
          inside();
          await held;
        },
      });
      await entered;
      try {
        const read = await Promise.race([
          repo.get("default", stored.id),
          new Promise<"waited">((resolve) => setTimeout(() => resolve("waited"), 2_000)),
        ]);
        expect(read === "waited" ? read : read?.id).toBe(stored.id);
        // The readiness probe reads where reads do: it answers too.
        const pinged = await Promise.race([
          repo.ping().then(() => "answered"),
          new Promise<"waited">((resolve) => setTimeout(() => resolve("waited"), 2_000)),
        ]);
        expect(pinged).toBe("answered");
      } finally {
        release();
      }
      expect((await writing).created).toBe(true);
    });
  });
});
