/**
 * The settings of config.ts, read a group at a time in the order parseConfig reads them: each group reads
 * its environment variables and adds what is wrong with them to `problems`, so one start lists them all.
 */
import { DEFAULT_MAX_TERMS_PER_DEFINITION } from "./domain/search-terms.js";
import { INSTANCE_REFERENCE } from "./domain/upsert.js";
import type { EnvReader } from "./env.js";
import type { LogLevel } from "./logger.js";
import { NOTHING_ALLOWED, parseProbeAllowance } from "./probe/address-guard.js";
import {
  defaultSearchMaxConcurrent,
  defaultSearchMaxPerTenant,
  defaultSearchTimeoutMs,
  defaultSqliteCheckpointIntervalMs,
  defaultSqliteSearchWorkers,
  MYSQL_POOL_SIZE,
  parseDatabaseUrl,
} from "./storage/sql-repository.js";

type Env = Readonly<Record<string, string | undefined>>;
type Integer = EnvReader["integer"];

const LOG_LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error", "silent"];
const TENANT = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const REFERENCE = INSTANCE_REFERENCE;

/** The port, and the limits of what a request and a write may hold and how long the database may take. */
export function readLimits(integer: Integer, problems: string[]) {
  const port = integer("PORT", 8080, 0, 65535);
  const maxBodyBytes = integer("MAX_BODY_BYTES", 1024 * 1024, 1024, 64 * 1024 * 1024);
  const maxBufferedBodyBytes = integer("MAX_BUFFERED_BODY_BYTES", 16 * 1024 * 1024, 1024, 4 * 1024 * 1024 * 1024);
  if (maxBufferedBodyBytes < maxBodyBytes)
    problems.push(
      `MAX_BUFFERED_BODY_BYTES (${maxBufferedBodyBytes}) must be at least MAX_BODY_BYTES (${maxBodyBytes}), or no ` +
        `body of the largest size is ever read`,
    );
  const maxConnections = integer("MAX_CONNECTIONS", 1_000, 1, 1_000_000);
  const maxTermsPerDefinition = integer("MAX_TERMS_PER_DEFINITION", DEFAULT_MAX_TERMS_PER_DEFINITION, 100, 1_000_000);
  const maxBufferedWriteBytes = integer("MAX_BUFFERED_WRITE_BYTES", 32 * 1024 * 1024, 1024, 4 * 1024 * 1024 * 1024);
  const databaseTimeoutMs = integer("DATABASE_TIMEOUT_MS", 10_000, 100, 600_000);
  const databaseSyncWait = integer("DATABASE_SYNC_WAIT", 1, 0, 15);
  const sqliteCheckpointIntervalMs = integer(
    "SQLITE_CHECKPOINT_INTERVAL_MS",
    defaultSqliteCheckpointIntervalMs,
    0,
    60_000,
  );
  return {
    port,
    maxBodyBytes,
    maxBufferedBodyBytes,
    maxConnections,
    maxTermsPerDefinition,
    maxBufferedWriteBytes,
    databaseTimeoutMs,
    databaseSyncWait,
    sqliteCheckpointIntervalMs,
  };
}

/** The HTTP servers' timeouts and HTTP/2's streams. */
export function readHttp(integer: Integer, problems: string[]) {
  const requestTimeoutMs = integer("HTTP_REQUEST_TIMEOUT_MS", 60_000, 100, 3_600_000);
  const http = {
    headersTimeoutMs: integer("HTTP_HEADERS_TIMEOUT_MS", 20_000, 100, 600_000),
    requestTimeoutMs,
    // The body's deadline is within the request's: by default the shorter of 10 s and the request timeout.
    bodyTimeoutMs: integer("HTTP_BODY_TIMEOUT_MS", Math.min(10_000, requestTimeoutMs), 100, 3_600_000),
    http2IdleTimeoutMs: integer("HTTP2_IDLE_TIMEOUT_MS", 120_000, 100, 3_600_000),
    http2MaxConcurrentStreams: integer("HTTP2_MAX_CONCURRENT_STREAMS", 100, 1, 10_000),
  };
  if (http.bodyTimeoutMs > http.requestTimeoutMs)
    problems.push(
      `HTTP_BODY_TIMEOUT_MS (${http.bodyTimeoutMs}) must not exceed HTTP_REQUEST_TIMEOUT_MS (${http.requestTimeoutMs})`,
    );
  return http;
}

/** The searches' gate and time limit. */
export function readSearch(integer: Integer, problems: string[]) {
  const maxConcurrent = integer("SEARCH_MAX_CONCURRENT", defaultSearchMaxConcurrent, 1, 1_000);
  const search = {
    maxConcurrent,
    // The default gives way to a smaller SEARCH_MAX_CONCURRENT; a value set larger is refused below.
    maxPerTenant: integer("SEARCH_MAX_PER_TENANT", Math.min(defaultSearchMaxPerTenant, maxConcurrent), 1, 1_000),
    timeoutMs: integer("SEARCH_TIMEOUT_MS", defaultSearchTimeoutMs, 0, 600_000),
    sqliteWorkers: integer("SEARCH_SQLITE_WORKERS", defaultSqliteSearchWorkers, 1, 64),
  };
  if (search.maxConcurrent >= MYSQL_POOL_SIZE) {
    problems.push(
      `SEARCH_MAX_CONCURRENT (${search.maxConcurrent}) must be below the database pool's ${MYSQL_POOL_SIZE} ` +
        `connections, so searches always leave some to reads and writes`,
    );
  }
  if (search.maxPerTenant > search.maxConcurrent) {
    problems.push(
      `SEARCH_MAX_PER_TENANT (${search.maxPerTenant}) must not exceed SEARCH_MAX_CONCURRENT (${search.maxConcurrent})`,
    );
  }
  return search;
}

/** The watch: its polls, queues, replays, retention and limits. */
export function readWatch(integer: Integer, maxConnections: number, problems: string[]) {
  return {
    pollMs: integer("WATCH_POLL_MS", 200, 10, 60_000),
    bookmarkMs: integer("WATCH_BOOKMARK_MS", 30_000, 10, 3_600_000),
    queueLimit: integer("WATCH_QUEUE_LIMIT", 1_000, 1, 1_000_000),
    queueMaxBytes: integer("WATCH_QUEUE_MAX_BYTES", 16 * 1024 * 1024, 64 * 1024, 4 * 1024 * 1024 * 1024),
    batchMaxBytes: integer("WATCH_BATCH_MAX_BYTES", 1024 * 1024, 1024, 256 * 1024 * 1024),
    replayMaxBytes: integer("WATCH_REPLAY_MAX_BYTES", 16 * 1024 * 1024, 64 * 1024, 4 * 1024 * 1024 * 1024),
    replayWaitMs: integer("WATCH_REPLAY_WAIT_MS", 5_000, 0, 600_000),
    replayHoldMs: integer("WATCH_REPLAY_HOLD_MS", 10_000, 100, 3_600_000),
    retentionCount: integer("WATCH_RETENTION_COUNT", 100_000, 0, 1_000_000_000),
    retentionSeconds: integer("WATCH_RETENTION_SECONDS", 604_800, 0, 100 * 365 * 86_400),
    compactSeconds: integer("WATCH_COMPACT_SECONDS", 60, 0, 86_400),
    tokenRecheckMs: integer("WATCH_TOKEN_RECHECK_MS", 60_000, 100, 3_600_000),
    ...watchLimits(integer, maxConnections, problems),
  };
}

/**
 * The watches' limits (issue 50, item 2). The defaults give way to smaller settings above them (a tenant's
 * share to half the process's, a caller's and HTTP/1.1's to the tenant's); a value set past them is refused.
 */
function watchLimits(integer: Integer, maxConnections: number, problems: string[]) {
  const maxOpen = integer("WATCH_MAX_OPEN", 2_500, 2, 1_000_000);
  const maxPerTenant = integer("WATCH_MAX_PER_TENANT", Math.min(2_000, Math.floor(maxOpen / 2)), 1, 1_000_000);
  const maxPerToken = integer("WATCH_MAX_PER_TOKEN", Math.min(100, maxPerTenant), 1, 1_000_000);
  const maxHttp1PerTenant = integer(
    "WATCH_MAX_HTTP1_PER_TENANT",
    Math.max(1, Math.min(maxPerTenant, Math.floor(maxConnections / 2))),
    1,
    1_000_000,
  );
  // One tenant never holds every place of the process, nor every connection it accepts.
  if (maxPerTenant >= maxOpen)
    problems.push(`WATCH_MAX_PER_TENANT (${maxPerTenant}) must be below WATCH_MAX_OPEN (${maxOpen})`);
  if (maxPerToken > maxPerTenant)
    problems.push(`WATCH_MAX_PER_TOKEN (${maxPerToken}) must not exceed WATCH_MAX_PER_TENANT (${maxPerTenant})`);
  if (maxHttp1PerTenant >= maxConnections && maxConnections > 1)
    problems.push(
      `WATCH_MAX_HTTP1_PER_TENANT (${maxHttp1PerTenant}) must be below MAX_CONNECTIONS (${maxConnections})`,
    );
  return { maxOpen, maxPerTenant, maxPerToken, maxHttp1PerTenant };
}

/** Where the data lives: DATABASE_URL and DATABASE_WRITE_URL, each checked. */
export function readDatabaseUrls(env: Env, problems: string[]) {
  const databaseUrl = env.DATABASE_URL === "" ? undefined : env.DATABASE_URL;
  if (databaseUrl !== undefined) {
    try {
      parseDatabaseUrl(databaseUrl);
      if (!databaseUrl.startsWith("mysql://")) throw new Error("must be a mysql:// URL");
    } catch (error) {
      problems.push(`DATABASE_URL ${(error as Error).message}`);
    }
  }
  const databaseWriteUrl = env.DATABASE_WRITE_URL === "" ? undefined : env.DATABASE_WRITE_URL;
  if (databaseWriteUrl !== undefined) {
    try {
      parseDatabaseUrl(databaseWriteUrl);
      if (!databaseWriteUrl.startsWith("mysql://")) throw new Error("must be a mysql:// URL");
      if (databaseUrl === undefined) throw new Error("needs DATABASE_URL (the reads' database) as well");
    } catch (error) {
      problems.push(`DATABASE_WRITE_URL ${(error as Error).message}`);
    }
  }
  return { databaseUrl, databaseWriteUrl };
}

/** The default tenant, the log level and the host system's provider and platform. */
export function readNames(env: Env, problems: string[]) {
  const defaultTenant = env.DEFAULT_TENANT || "default";
  if (!TENANT.test(defaultTenant))
    problems.push(`DEFAULT_TENANT "${defaultTenant}" is not a tenant name (letters, digits, _ . -; at most 63)`);
  const logLevel = (env.LOG_LEVEL || "info") as LogLevel;
  if (!LOG_LEVELS.includes(logLevel))
    problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}, not "${logLevel}"`);
  const reference = (name: string, fallback: string): string => {
    const value = env[name] || fallback;
    if (!REFERENCE.test(value))
      problems.push(`${name} "${value}" is not an instance id (32 lowercase hex, or <key>=<value>)`);
    return value;
  };
  const hostSystem = {
    providerId: reference("HOST_PROVIDER_ID", "Provider=HOST"),
    platformId: reference("HOST_PLATFORM_ID", "Platform=HOST"),
  };
  return { defaultTenant, logLevel, hostSystem };
}

/** The catalog's sign-in with an OpenID issuer. */
export function readUi(env: Env, problems: string[]) {
  const ui = {
    oidcClientId: env.UI_OIDC_CLIENT_ID?.trim() || undefined,
    oidcScope: env.UI_OIDC_SCOPE?.trim() || "openid",
    oidcResource: env.UI_OIDC_RESOURCE?.trim() || undefined,
  };
  if (ui.oidcResource !== undefined && !URL.canParse(ui.oidcResource))
    problems.push(`UI_OIDC_RESOURCE "${ui.oidcResource}" is not an absolute URI`);
  return ui;
}

/** The most a retired card signing key may stay published: a year. */
const MAX_KEY_OVERLAP_SECONDS = 366 * 86_400;

/**
 * The registry's card signing keys (issue 43): a private JWK file, or a directory of them, or neither (the key
 * made in DATA_DIR), and how long a retired key stays in the JWKS.
 */
export function readCardSigning(env: Env, integer: Integer, problems: string[]) {
  const keyFile = env.CARD_SIGNING_KEY_FILE?.trim() || undefined;
  const keysDir = env.CARD_SIGNING_KEYS_DIR?.trim() || undefined;
  if (keyFile !== undefined && keysDir !== undefined)
    problems.push("CARD_SIGNING_KEY_FILE and CARD_SIGNING_KEYS_DIR name two sources of keys: set one");
  const overlapSeconds = integer("CARD_SIGNING_KEY_OVERLAP_SECONDS", 7 * 86_400, 0, MAX_KEY_OVERLAP_SECONDS);
  return { keyFile, keysDir, overlapSeconds };
}

/** The prober (issue 44; docs/liveness.md): its schedule, its bounds, what it may connect to. */
export function readProbe(env: Env, { integer, flag }: Pick<EnvReader, "integer" | "flag">, problems: string[]) {
  const concurrency = integer("PROBE_CONCURRENCY", 16, 1, 10_000);
  const probe = {
    enabled: flag("PROBE_ENABLED", true),
    intervalMs: integer("PROBE_INTERVAL_MS", 300_000, 100, 7 * 86_400_000),
    timeoutMs: integer("PROBE_TIMEOUT_MS", 5_000, 10, 600_000),
    maxBodyBytes: integer("PROBE_MAX_BODY_BYTES", 256 * 1024, 1024, 64 * 1024 * 1024),
    maxRedirects: integer("PROBE_MAX_REDIRECTS", 3, 0, 20),
    concurrency,
    // The default gives way to a smaller PROBE_CONCURRENCY; a value set larger is refused below.
    concurrencyPerHost: integer("PROBE_CONCURRENCY_PER_HOST", Math.min(4, concurrency), 1, 10_000),
    downAfter: integer("PROBE_DOWN_AFTER", 2, 1, 1_000),
    allow: NOTHING_ALLOWED,
  };
  try {
    probe.allow = parseProbeAllowance(env.PROBE_ALLOW ?? "");
  } catch (error) {
    problems.push((error as Error).message);
  }
  if (probe.concurrencyPerHost > probe.concurrency)
    problems.push(
      `PROBE_CONCURRENCY_PER_HOST (${probe.concurrencyPerHost}) must not exceed PROBE_CONCURRENCY (${concurrency})`,
    );
  return probe;
}
