/**
 * One process that migrates a database, for the tests of the migration lock
 * (test/storage/migration-lock.test.ts), run as `node --import tsx`:
 *
 *   migrate-process.ts migrate <databaseUrl | sqlite dataDir>
 *     brings the schema up to date as a start does (createSqlRepository) and exits 0,
 *     or prints the error and exits 1.
 *   migrate-process.ts hold <databaseUrl> <leaseMs> <renewMs>
 *     takes the MySQL migration lease and holds it, renewing it, printing `held <owner>`,
 *     until stdin ends (then gives it back and exits) or the process is killed.
 */
import { openDatabase } from "../../src/storage/run/connection.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";

const [mode, target, leaseMs, renewMs] = process.argv.slice(2);
if (target === undefined) throw new Error("usage: migrate-process.ts migrate|hold <databaseUrl | dataDir> ...");
const where = target.startsWith("mysql://") ? { databaseUrl: target, dataDir: "" } : { dataDir: target };

if (mode === "migrate") {
  try {
    await (await createSqlRepository(where)).close();
    process.exit(0);
  } catch (error) {
    console.error(error);
    process.exit(1);
  }
} else if (mode === "hold") {
  // Imported here: `migrate` runs whichever runner the tree has (the test is run against the runner before the lease).
  const { withMigrationLease } = await import("../../src/storage/migrations/migration-lock.js");
  const database = await openDatabase(where);
  const times = { leaseMs: Number(leaseMs), renewMs: Number(renewMs), pollMs: 100 };
  await withMigrationLease(
    database.db,
    10_000,
    async (lease) => {
      console.log(`held ${lease.owner}`);
      process.stdin.resume();
      await new Promise((resolve) => process.stdin.once("end", resolve));
    },
    times,
  );
  await database.db.destroy();
  process.exit(0);
} else {
  throw new Error(`unknown mode ${mode}`);
}
