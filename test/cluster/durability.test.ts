import { describe, expect, it } from "vitest";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { galeraSkipped, queryNode, useGaleraDatabase } from "../support/galera.js";

/**
 * A Galera node that acknowledges commits before they are on its disk (innodb_flush_log_at_trx_commit
 * 0 or 2) loses them when every node crashes at once: the registry refuses to start on one
 * (migrations/server-settings.ts checkDurability), and starts on the others.
 */
describe.skipIf(galeraSkipped())("innodb_flush_log_at_trx_commit on a Galera node", () => {
  const db = useGaleraDatabase();

  it("a start through a node with innodb_flush_log_at_trx_commit = 2 fails and says why; node 1 serves", async () => {
    // A global variable is the node's own: Galera does not replicate SET GLOBAL.
    await queryNode(3, "SET GLOBAL innodb_flush_log_at_trx_commit = 2");
    try {
      await expect(createSqlRepository({ databaseUrl: db().url(3), dataDir: db().dataDir })).rejects.toThrow(
        /innodb_flush_log_at_trx_commit = 2.*Set innodb_flush_log_at_trx_commit = 1/s,
      );
      const serving = await createSqlRepository({ databaseUrl: db().url(1), dataDir: db().dataDir });
      await serving.close();
    } finally {
      await queryNode(3, "SET GLOBAL innodb_flush_log_at_trx_commit = 1");
    }
  }, 60_000);
});
