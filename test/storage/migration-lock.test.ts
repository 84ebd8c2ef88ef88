/**
 * The migration lock between processes (migrations/migration-lock.ts,
 * migrations/index.ts), with real processes (test/support/migrate-process.ts):
 *
 * - several processes migrating one fresh database at once all come up, and
 *   each migration is recorded once (SQLite and MariaDB);
 * - on MariaDB, the lease row: a lease its owner keeps renewing is not taken
 *   while it lives, however long the lease would have lasted unrenewed; the
 *   lease of a process killed mid-migration is taken over once it expires,
 *   with the knex lock it left, and the migration completes.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type { Knex } from "knex";
import { describe, expect, it } from "vitest";
import { migrateToLatest, migrations } from "../../src/storage/migrations/index.js";
import { LEASE_TABLE } from "../../src/storage/migrations/migration-lock.js";
import { openDatabase } from "../../src/storage/run/connection.js";
import { type FreshDatabase, forEachDatabase, testDatabases } from "../support/databases.js";

const PROCESSES = 4;

function targetOf(database: FreshDatabase): string {
  return database.databaseUrl ?? database.dataDir;
}

function migrateProcess(args: string[]): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", "test/support/migrate-process.ts", ...args], {
    env: { ...process.env, LOG_LEVEL: "error" },
    stdio: ["pipe", "pipe", "pipe"],
  });
}

/** Exit code and stderr of a process run to its end. */
function finished(child: ChildProcess): Promise<{ code: number | null; stderr: string }> {
  const stderr: string[] = [];
  child.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk.toString()));
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, stderr: stderr.join("") })));
}

/** A process holding the lease: resolves once it says so, with its owner id. */
async function holding(database: FreshDatabase, leaseMs: number, renewMs: number) {
  const child = migrateProcess(["hold", targetOf(database), String(leaseMs), String(renewMs)]);
  const exit = finished(child);
  const owner = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      if (line.startsWith("held ")) resolve(line.slice("held ".length));
    });
    void exit.then(({ code, stderr }) => reject(new Error(`the holder exited with ${code}: ${stderr}`)));
  });
  return { child, owner, exit };
}

async function recorded(db: Knex): Promise<string[]> {
  const rows = (await db("knex_migrations").select("name").orderBy("id")) as Array<{ name: string }>;
  return rows.map((row) => row.name);
}

forEachDatabase((kind) => {
  it(`${PROCESSES} processes migrating one fresh database at once all come up, each migration run once`, async () => {
    const database = await kind.create();
    try {
      const runs = await Promise.all(
        Array.from({ length: PROCESSES }, () => finished(migrateProcess(["migrate", targetOf(database)]))),
      );
      expect(runs.map((run) => (run.code === 0 ? "ok" : run.stderr.slice(0, 2000)))).toEqual(runs.map(() => "ok"));
      const direct = await openDatabase(database);
      try {
        expect(await recorded(direct.db)).toEqual(migrations.map((m) => m.name));
        expect(await direct.db("knex_migrations_lock").select("is_locked")).toEqual([{ is_locked: 0 }]);
        if (kind.name === "mariadb")
          expect(await direct.db(LEASE_TABLE).select("id", "owner", "expires_at")).toEqual([
            { id: 1, owner: null, expires_at: null },
          ]);
      } finally {
        await direct.db.destroy();
      }
    } finally {
      await database.cleanup();
    }
  }, 120_000);
});

const mariadb = testDatabases().find((d) => d.name === "mariadb")!;

describe.skipIf(mariadb.skip)("the migration lease on MariaDB", () => {
  const lease = { leaseMs: 2_000, renewMs: 250, pollMs: 100 };

  it("is not taken from a live process that renews it, and is taken once it gives it back", async () => {
    const database = await mariadb.create();
    const direct = await openDatabase(database);
    try {
      const holder = await holding(database, lease.leaseMs, lease.renewMs);
      try {
        // Waiting 2.5 leases: the holder's lease would have expired twice over had it not been renewed.
        await expect(migrateToLatest(direct.db, { lease, waitMs: 5_000 })).rejects.toThrow(
          `held this database's migration lease (table ${LEASE_TABLE}) for over 5 s: ${holder.owner}`,
        );
        expect(await direct.db.schema.hasTable("knex_migrations")).toBe(false);
      } finally {
        holder.child.stdin!.end();
      }
      expect((await holder.exit).code).toBe(0);
      await migrateToLatest(direct.db, { lease, waitMs: 5_000 });
      expect(await recorded(direct.db)).toEqual(migrations.map((m) => m.name));
    } finally {
      await direct.db.destroy();
      await database.cleanup();
    }
  }, 60_000);

  it("is taken over once a process killed mid-migration stops renewing it, with the knex lock it left", async () => {
    const database = await mariadb.create();
    const direct = await openDatabase(database);
    try {
      // The schema as the killed process left it: its last migration not recorded, knex's lock set, its lease.
      await migrateToLatest(direct.db);
      const newest = migrations.at(-1)!.name;
      await direct.db("knex_migrations").where({ name: newest }).delete();
      await direct.db("knex_migrations_lock").update({ is_locked: 1 });
      const holder = await holding(database, lease.leaseMs, lease.renewMs);
      holder.child.kill("SIGKILL");
      await holder.exit;
      expect(await direct.db(LEASE_TABLE).select("owner")).toEqual([{ owner: holder.owner }]);

      await migrateToLatest(direct.db, { lease, waitMs: 30_000 });
      expect(await recorded(direct.db)).toEqual(migrations.map((m) => m.name));
      expect(await direct.db("knex_migrations_lock").select("is_locked")).toEqual([{ is_locked: 0 }]);
      expect(await direct.db(LEASE_TABLE).select("owner")).toEqual([{ owner: null }]);
    } finally {
      await direct.db.destroy();
      await database.cleanup();
    }
  }, 60_000);
});
