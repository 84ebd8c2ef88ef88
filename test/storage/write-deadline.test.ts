import { createConnection } from "mysql2/promise";
import { describe, expect, it } from "vitest";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { testDatabases, useFreshDatabase } from "../support/databases.js";
import { mysqlConnectionOptions } from "../support/mysql-url.js";
import { definition, save, withWriteHook } from "./fixtures.js";

const mariadb = testDatabases()[1]!;

/**
 * A write that keeps losing to other writes of the tenant (here: another transaction holds the tenant's
 * sequence row, so every attempt to number a new agent ends in a lock wait timeout) is tried until its
 * deadline, DATABASE_TIMEOUT_MS, and then refused with words that say what happened.
 */
describe.skipIf(mariadb.skip)("a write on a busy tenant, on MariaDB", () => {
  const target = useFreshDatabase(mariadb);

  it("is retried until its deadline, then refused as CONFLICT: the tenant was busy, not the same agent", async () => {
    // A lock wait gives up after 1 s (half the timeout, rounded down to whole seconds).
    const repo = await createSqlRepository({ ...target(), timeoutMs: 2_500 });
    const holder = await createConnection(mysqlConnectionOptions(target().databaseUrl!));
    let attempts = 0;
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT * FROM tenants WHERE name = 'default' FOR UPDATE");
      const counting = withWriteHook(repo, (tx) => {
        attempts++;
        return tx;
      });
      const refused = save(counting, definition({ name: "Waits for the sequence" }));
      await expect(refused).rejects.toMatchObject({
        code: "CONFLICT",
        message: expect.stringContaining("the tenant was busy with other writes"),
      });
      // More than one attempt, each a lock wait of 1 s, within the 2.5 s deadline.
      expect(attempts).toBeGreaterThanOrEqual(2);
    } finally {
      await holder.query("ROLLBACK");
      await holder.end();
      await repo.close();
    }
  });
});
