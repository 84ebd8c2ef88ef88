/**
 * The registry's storage as the config names it, and what every watch of the process shares (split from app.ts,
 * which wires them).
 */
import type { Config } from "./config.js";
import type { Logger } from "./logger.js";
import { createWatchLimits } from "./operations/watch-limits.js";
import type { AgentDefinitionRepository } from "./storage/repository.js";
import { createByteGate, createChangeReader, createSqlRepository } from "./storage/sql-repository.js";

/** The registry's storage (SQL), as the config names it. */
export function openRepository(config: Config, logger: Logger): Promise<AgentDefinitionRepository> {
  return createSqlRepository({
    databaseUrl: config.databaseUrl,
    databaseWriteUrl: config.databaseWriteUrl,
    dataDir: config.dataDir,
    timeoutMs: config.databaseTimeoutMs,
    syncWait: config.databaseSyncWait,
    checkpointIntervalMs: config.sqliteCheckpointIntervalMs,
    search: {
      maxConcurrent: config.search.maxConcurrent,
      maxPerTenant: config.search.maxPerTenant,
      timeoutMs: config.search.timeoutMs,
      sqliteWorkers: config.search.sqliteWorkers,
    },
    pageMaxBytes: config.pageMaxBytes,
    logger,
  });
}

/** What the watches share: the replay's byte gate, the process's one change reader, and the limits of open watches. */
export function createWatching(config: Config, repository: AgentDefinitionRepository, logger: Logger) {
  // What every watch's start from an older revision holds at once (issue 50).
  const watchReplay = createByteGate(config.watch.replayMaxBytes);
  // The process's one change reader: every watch of every surface reads through it (issue 20).
  const changes = createChangeReader({
    log: repository.changeLog(),
    pollMs: config.watch.pollMs,
    bookmarkMs: config.watch.bookmarkMs,
    queueLimit: config.watch.queueLimit,
    queueBytes: config.watch.queueMaxBytes,
    batchBytes: config.watch.batchMaxBytes,
    replay: watchReplay,
    replayWaitMs: config.watch.replayWaitMs,
    replayHoldMs: config.watch.replayHoldMs,
    retention: { count: config.watch.retentionCount, maxAgeMs: config.watch.retentionSeconds * 1000 },
    compactMs: config.watch.compactSeconds * 1000,
    onError: (what, error) => logger.warn(`${what} failed; trying again`, { error: String(error) }),
  });
  const watchLimits = createWatchLimits({
    perToken: config.watch.maxPerToken,
    perTenant: config.watch.maxPerTenant,
    http1PerTenant: config.watch.maxHttp1PerTenant,
    total: config.watch.maxOpen,
  });
  return { watchReplay, changes, watchLimits };
}
