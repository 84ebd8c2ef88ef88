/**
 * SQLite's WAL checkpoints off the event loop (issue 50, item 3;
 * run/sqlite-checkpointer.ts). By default the COMMIT that takes the WAL past
 * 1,000 pages (~4 MB) checkpoints it on the main thread: copies the WAL into
 * the database file and syncs it. Here the writer's connection leaves that to
 * a worker thread's connection, and the WAL stays bounded.
 */
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { fromJson } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { openDatabase, sqliteFileName } from "../../src/storage/run/connection.js";
import {
  createSqliteCheckpointer,
  SQLITE_WAL_HARD_CAP_BYTES,
  SQLITE_WAL_SOFT_CAP_BYTES,
} from "../../src/storage/run/sqlite-checkpointer.js";
import { createSqlRepository } from "../../src/storage/sql-repository.js";
import { testDatabases, useFreshDatabase } from "../support/databases.js";
import { runDenoScript } from "../support/deno-script.js";
import { distinctWordsDefinition } from "../support/distinct-words.js";
import { save } from "./fixtures.js";

const [sqlite] = testDatabases();

/** A definition of `count` distinct words (each a term row): ~2 MB of WAL per 10,000 words. */
const wordy = (name: string, from: number, count: number) =>
  fromJson(AgentDefinitionSchema, distinctWordsDefinition(name, from, count) as never);

const sizeOf = async (file: string): Promise<number> => (await stat(file).catch(() => ({ size: 0 }))).size;

describe("the SQLite WAL's checkpoints", () => {
  describe("with the checkpoint thread idle (an interval longer than the test)", () => {
    const target = useFreshDatabase(sqlite!);

    it("the writer's COMMITs do not checkpoint the WAL past SQLite's default of 1,000 pages", async () => {
      const file = join(target().dataDir, sqliteFileName);
      const repository = await createSqlRepository({ ...target(), checkpointIntervalMs: 600_000 });
      try {
        const before = await sizeOf(file);
        for (let i = 0; i < 4; i++) await save(repository, wordy(`Wordy ${i}`, i * 10_000, 10_000));
        // Nobody checkpointed: every page written is still in the WAL alone.
        expect(await sizeOf(file)).toBe(before);
        // Past 1,000 pages of 4 KiB: the default auto-checkpoint would have copied it into the database file.
        expect(await sizeOf(`${file}-wal`)).toBeGreaterThan(6 * 1024 * 1024);
      } finally {
        await repository.close();
      }
      // The thread's connection closed with the repository's: the last one checkpointed the WAL and removed it.
      expect(await sizeOf(`${file}-wal`)).toBe(0);
    });
  });

  describe("with the checkpoint thread running", () => {
    const target = useFreshDatabase(sqlite!);

    it("the thread checkpoints, and the WAL stays under the soft cap plus a write", async () => {
      const file = join(target().dataDir, sqliteFileName);
      const repository = await createSqlRepository({ ...target(), checkpointIntervalMs: 20 });
      try {
        const before = await sizeOf(file);
        let largest = 0;
        // ~40 MB of WAL in all, past the soft cap twice.
        for (let i = 0; i < 20; i++) {
          await save(repository, wordy(`Wordy ${i}`, i * 10_000, 10_000));
          largest = Math.max(largest, await sizeOf(`${file}-wal`));
        }
        expect(await sizeOf(file)).toBeGreaterThan(before);
        expect(largest).toBeLessThan(SQLITE_WAL_SOFT_CAP_BYTES + 8 * 1024 * 1024);
      } finally {
        await repository.close();
      }
    });

    it("close() ends the thread even while it starts, and again and again", async () => {
      for (let i = 0; i < 5; i++) {
        const repository = await createSqlRepository({ ...target(), checkpointIntervalMs: 10 });
        await save(repository, wordy(`Short ${i}`, 500_000 + i * 100, 100));
        await repository.close();
      }
      expect(await sizeOf(`${join(target().dataDir, sqliteFileName)}-wal`)).toBe(0);
    });
  });

  describe("with the thread stalled (never started)", () => {
    const target = useFreshDatabase(sqlite!);

    it("the writer's own checkpoint past the hard cap bounds the WAL", async () => {
      const file = join(target().dataDir, sqliteFileName);
      // The writer's connection as a checkpointing repository opens it; no thread runs.
      const { db } = await openDatabase({ ...target(), checkpointIntervalMs: 1_000 });
      try {
        await db.raw("CREATE TABLE blobs (b BLOB)");
        const blob = Buffer.alloc(1024 * 1024, 7);
        for (let i = 0; i < 96; i++) await db.raw("INSERT INTO blobs VALUES (?)", [blob]);
        const wal = await sizeOf(`${file}-wal`);
        expect(wal).toBeGreaterThan(SQLITE_WAL_HARD_CAP_BYTES / 2);
        expect(wal).toBeLessThan(SQLITE_WAL_HARD_CAP_BYTES + 4 * 1024 * 1024);
      } finally {
        await db.destroy();
      }
    });

    it("a checkpointer closed before any write starts no thread", async () => {
      const checkpointer = createSqliteCheckpointer(join(target().dataDir, sqliteFileName), 10);
      await checkpointer.close();
      await checkpointer.beforeWrite();
      expect(checkpointer.stats()).toEqual({ checkpoints: 0, last: undefined, pageSize: 4096 });
    });
  });

  describe("under Deno (node:sqlite, its worker_threads)", () => {
    const target = useFreshDatabase(sqlite!);

    it("the thread checkpoints what the main thread's connection wrote, and close() ends it", async () => {
      const answer = await runDenoScript("test/storage/sqlite-checkpointer.deno.ts", target().dataDir, [
        join(target().dataDir, sqliteFileName),
      ]);
      expect(answer).toEqual({
        deno: true,
        checkpointed: true,
        closedAtOnce: true,
      });
    }, 180_000);
  });
});
