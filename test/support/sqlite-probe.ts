/**
 * Provokes each kind of failure the repository tells apart on the embedded
 * database, through the knex client connection.ts builds (better-sqlite3 under
 * Node, node:sqlite under Deno), and prints how each was classified, as JSON.
 * test/storage/sqlite-client.test.ts runs it under both runtimes and compares.
 *
 *   <runtime> test/support/sqlite-probe.ts <empty directory>
 */
import { openDatabase } from "../../src/storage/run/connection.js";
import { classifyDriverError, isDuplicateKey } from "../../src/storage/run/driver-errors.js";

const dataDir = process.argv[2];
if (dataDir === undefined) throw new Error("usage: sqlite-probe.ts <empty directory>");

const first = await openDatabase({ dataDir });
const second = await openDatabase({ dataDir });
const outcomes: Record<string, unknown> = {};

/** How `attempt` failed: the driver's code and what the repository makes of it. */
async function outcome(name: string, attempt: () => Promise<unknown>): Promise<void> {
  try {
    await attempt();
    outcomes[name] = "succeeded";
  } catch (error: unknown) {
    outcomes[name] = {
      code: (error as { code?: unknown }).code,
      kind: classifyDriverError(error),
      duplicateKey: isDuplicateKey(error),
    };
  }
}

try {
  await first.db.raw("CREATE TABLE probe (k TEXT PRIMARY KEY, u TEXT UNIQUE, b BLOB)");
  await first.db("probe").insert({ k: "1", u: "taken", b: Buffer.from([0, 1, 254, 255]) });
  const [row] = await second.db("probe").select("b").where({ k: "1" });
  outcomes.blobReadBack = Array.from(row.b as Uint8Array);

  await outcome("uniqueViolation", () => first.db("probe").insert({ k: "2", u: "taken" }));
  await outcome("primaryKeyViolation", () => first.db("probe").insert({ k: "1", u: "free" }));

  // Busy: the other connection holds the write lock, and this one does not wait for it.
  await second.db.raw("BEGIN IMMEDIATE");
  await first.db.raw("PRAGMA busy_timeout = 0");
  await outcome("busy", () => first.db("probe").insert({ k: "3", u: "busy" }));
  await second.db.raw("ROLLBACK");

  // Full: the file may not grow, as on a full disk.
  const [{ page_count: pages }] = (await first.db.raw("PRAGMA page_count")) as { page_count: number }[];
  await first.db.raw(`PRAGMA max_page_count = ${pages}`);
  await outcome("full", () => first.db("probe").insert({ k: "4", u: "full", b: Buffer.alloc(256 * 1024) }));
} finally {
  await first.db.destroy();
  await second.db.destroy();
}
process.stdout.write(`${JSON.stringify(outcomes)}\n`);
