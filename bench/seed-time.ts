/**
 * Times the bench's seeding alone (issue 24, item 3): makes a fresh bench database, seeds its tenant to `n`
 * definitions with bench/seed.ts, prints the time, and drops the database and data dir.
 *
 *   node --import tsx bench/seed-time.ts <mysql|sqlite> <n> [--checkout <dir>] [--makers <threads>] [--writers <n>]
 *
 * `--checkout` seeds with another checkout's bench/seed.ts (e.g. one at an older commit, for a before and
 * after); MariaDB at 127.0.0.1:3306, database asor_bench_seed_time.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { checkout: { type: "string" }, makers: { type: "string" }, writers: { type: "string" } },
});
const [kind, size] = positionals;
if ((kind !== "mysql" && kind !== "sqlite") || !Number.isInteger(Number(size))) {
  console.error(
    "usage: node --import tsx bench/seed-time.ts <mysql|sqlite> <n> [--checkout <dir>] [--makers <n>] [--writers <n>]",
  );
  process.exit(2);
}
const root = values.checkout === undefined ? new URL("..", import.meta.url).pathname : resolve(values.checkout);
const { createBenchDatabase } = (await import(
  join(root, "bench/bench-database.ts")
)) as typeof import("./bench-database.js");
const { openSeeder } = (await import(join(root, "bench/seed.ts"))) as typeof import("./seed.js");

const dataDir = await mkdtemp(join(tmpdir(), "asor-bench-"));
const database = await createBenchDatabase({
  serverUrl: kind === "mysql" ? "mysql://root@127.0.0.1:3306" : undefined,
  name: "asor_bench_seed_time",
  dataDir,
  tenant: "bench",
  sequencePrefix: "BENCH-",
});
try {
  const seeder = await openSeeder({
    databaseUrl: database.databaseUrl,
    dataDir,
    tenant: "bench",
    ...(values.makers === undefined ? {} : { makers: Number(values.makers) }),
    ...(values.writers === undefined ? {} : { writers: Number(values.writers) }),
  });
  try {
    const t0 = performance.now();
    const added = await seeder.topUp(Number(size));
    console.log(`${kind}: seeded ${added} definitions in ${((performance.now() - t0) / 1000).toFixed(1)} s (${root})`);
  } finally {
    await seeder.close();
  }
} finally {
  await database.drop();
  await rm(dataDir, { recursive: true, force: true });
}
