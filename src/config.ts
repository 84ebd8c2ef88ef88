import { type AuthConfig, devIssuerProblem, parseAuthConfig } from "./auth/auth-config.js";
import {
  readCardSigning,
  readDatabaseUrls,
  readHttp,
  readLimits,
  readNames,
  readProbe,
  readSearch,
  readUi,
  readWatch,
} from "./config-sections.js";
import { envReader } from "./env.js";
import type { LogLevel } from "./logger.js";
import type { ProbeAllowance } from "./probe/address-guard.js";
import type { ProbeSettings } from "./probe/prober.js";
import { defaultPageMaxBytes, parseDatabaseUrl } from "./storage/sql-repository.js";

/** The service's settings, parsed once from an injected environment. */
export interface Config {
  /** TCP port of every surface (gRPC, gRPC-Web, Connect, REST). `PORT`, default 8080. */
  readonly port: number;
  /** Interface to listen on. `HOST`, default 127.0.0.1 (use 0.0.0.0 in a container). */
  readonly host: string;
  /**
   * `DATABASE_URL`: a mysql:// URL, of one host or several (`mysql://user:pass@h1:3306,h2:3306/db`: the
   * nodes of a Galera cluster, used one at a time). Absent: the embedded SQLite database under `dataDir`.
   */
  readonly databaseUrl: string | undefined;
  /**
   * `DATABASE_WRITE_URL`: a mysql:// URL (one host or several) that every write goes to instead, migrations
   * too; reads stay on `databaseUrl`. The same value on every replica of a Galera cluster: single-writer.
   * Absent: writes go where reads do. Needs `databaseUrl`.
   */
  readonly databaseWriteUrl: string | undefined;
  /** `DATA_DIR`, default ./data: the embedded database and local keys. */
  readonly dataDir: string;
  /** `DEFAULT_TENANT`, default `default`: the tenant of the contract's `/asor/v1` paths. */
  readonly defaultTenant: string;
  /** `MAX_BODY_BYTES`, default 1 MiB: the largest request body or message accepted. */
  readonly maxBodyBytes: number;
  /**
   * `MAX_BUFFERED_BODY_BYTES`, default 16 MiB: the request bytes all requests together may hold at
   * once (each reserves its declared Content-Length when it starts reading, else counts what
   * arrives); a body that would take the process past it is answered 503 OVERLOADED.
   */
  readonly maxBufferedBodyBytes: number;
  /**
   * `MAX_TERMS_PER_DEFINITION`, default 20000: the most distinct search terms (words of its texts and filter
   * values) one definition may have; a write of one with more is refused (400 TOO_MANY_TERMS) before its
   * transaction. Each term is a row its write inserts.
   */
  readonly maxTermsPerDefinition: number;
  /**
   * `MAX_BUFFERED_WRITE_BYTES`, default 32 MiB: what writes of definitions may hold in memory at once, each
   * weighed at 1 KiB per distinct term; a write that would pass it waits for earlier ones to end (one larger
   * than it runs alone).
   */
  readonly maxBufferedWriteBytes: number;
  /** `MAX_CONNECTIONS`, default 1000: open connections on the port; one more is closed at once. */
  readonly maxConnections: number;
  /**
   * `DATABASE_TIMEOUT_MS`, default 10000: the longest MySQL/MariaDB connect, pool
   * acquire, or wait for one statement's answer; past it the request fails with 503.
   */
  readonly databaseTimeoutMs: number;
  /**
   * `DATABASE_SYNC_WAIT`, default 1: the `wsrep_sync_wait` of every connection to a Galera node (0 to 15;
   * unused elsewhere). 1 makes each read and each write transaction wait until the node has applied every
   * commit the cluster made before it began, so a GET through one replica finds what a POST through another
   * answered 201 for (docs/galera.md).
   */
  readonly databaseSyncWait: number;
  /**
   * `SQLITE_CHECKPOINT_INTERVAL_MS`, default 250: embedded SQLite only, how often a worker thread checkpoints
   * the WAL (copies it into the database file), off the event loop; the writer's COMMITs then checkpoint only
   * past a 64 MiB WAL (the bound should the thread stall). 0: every COMMIT that takes the WAL past 1,000 pages
   * checkpoints it on the event loop (SQLite's default).
   */
  readonly sqliteCheckpointIntervalMs: number;
  /** The slow-client bounds of the Node server, so stalled clients cannot hold connections. */
  readonly http: {
    /**
     * `HTTP_HEADERS_TIMEOUT_MS`, default 20000: a connection's first bytes and a request's headers must
     * arrive within it.
     */
    readonly headersTimeoutMs: number;
    /**
     * `HTTP_REQUEST_TIMEOUT_MS`, default 60000: a whole request (headers and body; an HTTP/2 stream's body)
     * must arrive within it.
     */
    readonly requestTimeoutMs: number;
    /**
     * `HTTP_BODY_TIMEOUT_MS`, default 10000 (at most HTTP_REQUEST_TIMEOUT_MS): a request's body must have
     * arrived whole this long after its headers; HTTP/1.1 answers 408 and closes, HTTP/2 cancels the stream.
     */
    readonly bodyTimeoutMs: number;
    /** `HTTP2_IDLE_TIMEOUT_MS`, default 120000: an HTTP/2 connection without any traffic for this long is closed. */
    readonly http2IdleTimeoutMs: number;
    /** `HTTP2_MAX_CONCURRENT_STREAMS`, default 100: streams (calls) one HTTP/2 connection may have open at once. */
    readonly http2MaxConcurrentStreams: number;
  };
  /** The list's searches, gated and time-limited so they cannot take the database pool from reads and writes. */
  readonly search: {
    /**
     * `SEARCH_MAX_CONCURRENT`, default 4: search statements on the database at once (below the pool's
     * MYSQL_POOL_SIZE); others queue.
     */
    readonly maxConcurrent: number;
    /**
     * `SEARCH_MAX_PER_TENANT`, default 2, at most SEARCH_MAX_CONCURRENT: one tenant's search statements at
     * once; freed slots go round-robin between waiting tenants.
     */
    readonly maxPerTenant: number;
    /**
     * `SEARCH_TIMEOUT_MS`, default 10000, 0 for none: one search's time budget (its wait at the gate and all
     * its statements); MySQL/MariaDB stop a statement at it, SQLite answers 503 without waiting for it.
     */
    readonly timeoutMs: number;
    /**
     * `SEARCH_SQLITE_WORKERS`, default one less than the cores (1 to 4): SQLite only, the worker threads that
     * run costly search statements off the event loop.
     */
    readonly sqliteWorkers: number;
  };
  /**
   * `PAGE_MAX_BYTES`, default 4 MiB: the stored JSON bytes one page of a list
   * (or of an agent's versions) may hold; a page ends at `limit` definitions
   * or at this budget, whichever comes first, and always holds at least one.
   */
  readonly pageMaxBytes: number;
  /**
   * `HEALTH_MAX_WATCHES`, default 1000: gRPC `Health/Watch` streams open at once; more are refused
   * (RESOURCE_EXHAUSTED).
   */
  readonly healthMaxWatches: number;
  /** `HEALTH_MAX_WATCHES_PER_CONNECTION`, default 10: `Health/Watch` streams one connection may have open at once. */
  readonly healthMaxWatchesPerConnection: number;
  /**
   * `METRICS_PORT`: serve `/metrics` on this port (on `HOST`) instead of the API port;
   * 0 picks a free one. Unset (the default): `/metrics` is served on the API port.
   */
  readonly metricsPort: number | undefined;
  /**
   * `PUBLIC_URL`: the registry's URL as its clients reach it (`https://registry.example.com`, a path prefix
   * allowed), for the absolute URLs it hands out (MCP's protected resource metadata). Unset: the origin each
   * request was sent to, over `http://`.
   */
  readonly publicUrl: string | undefined;
  /** `LOG_LEVEL`: debug, info (default), warn, error or silent. */
  readonly logLevel: LogLevel;
  /** `SHUTDOWN_TIMEOUT_MS`, default 10000: how long requests in flight may take to finish after SIGTERM. */
  readonly shutdownTimeoutMs: number;
  /** The watch (issue 20; docs/api.md, "Watch"). */
  readonly watch: {
    /** `WATCH_POLL_MS`, default 200: how often the process reads the counters of the tenants it has watchers of. */
    readonly pollMs: number;
    /** `WATCH_BOOKMARK_MS`, default 30000: how often each watcher gets a BOOKMARK event. */
    readonly bookmarkMs: number;
    /** `WATCH_QUEUE_LIMIT`, default 1000: events a watcher may leave unread before it is closed (WATCH_TOO_SLOW). */
    readonly queueLimit: number;
    /**
     * `WATCH_QUEUE_MAX_BYTES`, default 16 MiB: bytes of definitions a watcher may leave queued before it is closed
     * (WATCH_TOO_SLOW); one event is always let through whatever its size.
     */
    readonly queueMaxBytes: number;
    /**
     * `WATCH_BATCH_MAX_BYTES`, default 1 MiB: the bytes of definitions a watcher is handed at once, and one read of the
     * change log holds (a larger definition goes alone).
     */
    readonly batchMaxBytes: number;
    /**
     * `WATCH_REPLAY_MAX_BYTES`, default 16 MiB: the bytes of definitions every watch starting from an older revision
     * holds at once, together; a read waits for its share (at least WATCH_BATCH_MAX_BYTES).
     */
    readonly replayMaxBytes: number;
    /**
     * `WATCH_REPLAY_WAIT_MS`, default 5000: how long a watch from an older revision waits for its first share of
     * WATCH_REPLAY_MAX_BYTES before it is refused (WATCH_REPLAY_BUSY, 503 with Retry-After).
     */
    readonly replayWaitMs: number;
    /**
     * `WATCH_REPLAY_HOLD_MS`, default 10000: how long a watch from an older revision may leave what it was handed
     * unread before it is closed (WATCH_TOO_SLOW) and its share of WATCH_REPLAY_MAX_BYTES goes to the next.
     */
    readonly replayHoldMs: number;
    /** `WATCH_RETENTION_COUNT`, default 100000: change records kept per tenant (its last revisions); 0: no limit. */
    readonly retentionCount: number;
    /** `WATCH_RETENTION_SECONDS`, default 604800 (7 days): change records older than this go; 0: no limit. */
    readonly retentionSeconds: number;
    /** `WATCH_COMPACT_SECONDS`, default 60: how often the process compacts the change log; 0: never. */
    readonly compactSeconds: number;
    /**
     * `WATCH_TOKEN_RECHECK_MS`, default 60000: how often the token of an open watch is checked again in full
     * (introspected anew, a JWT verified again); once refused, its watches end with UNAUTHENTICATED.
     */
    readonly tokenRecheckMs: number;
    /**
     * `WATCH_MAX_OPEN`, default 2500: watches the process holds at once, every surface together; one more is
     * refused (503 WATCHES_FULL, RESOURCE_EXHAUSTED). Sized from a watcher's heap cost: 16-22 KiB, so 2,500 take
     * about 55 MiB of the 128 MiB old space `npm start` gives (bench/watch-heap.ts).
     */
    readonly maxOpen: number;
    /**
     * `WATCH_MAX_PER_TENANT`, default 2000 or half of WATCH_MAX_OPEN if less (1250 by default), below
     * WATCH_MAX_OPEN: one tenant's watches; one more is refused (429 TOO_MANY_WATCHES).
     */
    readonly maxPerTenant: number;
    /**
     * `WATCH_MAX_PER_TOKEN`, default 100 (at most WATCH_MAX_PER_TENANT): one caller's watches in a tenant, every
     * token of its subject and client together; one more is refused (429 TOO_MANY_WATCHES).
     */
    readonly maxPerToken: number;
    /**
     * `WATCH_MAX_HTTP1_PER_TENANT`, default half of MAX_CONNECTIONS (at most WATCH_MAX_PER_TENANT), below
     * MAX_CONNECTIONS: one tenant's watches over HTTP/1.1 (SSE, gRPC-Web, Connect), each holding a connection;
     * one more is refused (429 TOO_MANY_WATCHES) and its connection closed.
     */
    readonly maxHttp1PerTenant: number;
  };
  /** The prober (issue 44; docs/liveness.md, "Settings"). */
  readonly probe: ProbeSettings & {
    /** `PROBE_ENABLED`, default true: false turns the prober off (and ProbeAgentDefinition answers 503). */
    readonly enabled: boolean;
    /** `PROBE_INTERVAL_MS`, default 300000 (5 minutes): each ACTIVE version is probed once per interval, ±10 %. */
    readonly intervalMs: number;
    /** `PROBE_TIMEOUT_MS`, default 5000: the whole of one probe, redirects and body included. */
    readonly timeoutMs: number;
    /** `PROBE_MAX_BODY_BYTES`, default 262144 (256 KiB): a longer card is a TOO_LARGE failure. */
    readonly maxBodyBytes: number;
    /** `PROBE_MAX_REDIRECTS`, default 3. */
    readonly maxRedirects: number;
    /** `PROBE_CONCURRENCY`, default 16: probes of this process in flight at once. */
    readonly concurrency: number;
    /** `PROBE_CONCURRENCY_PER_HOST`, default 4 (at most PROBE_CONCURRENCY): probes of one host at once. */
    readonly concurrencyPerHost: number;
    /** `PROBE_DOWN_AFTER`, default 2: failed probes in a row that make an agent DOWN (UP at the first success). */
    readonly downAfter: number;
    /**
     * `PROBE_ALLOW`: CIDRs and host names the prober may connect to besides public addresses (address-guard.ts);
     * default none.
     */
    readonly allow: ProbeAllowance;
  };
  /** `HOST_PROVIDER_ID` and `HOST_PLATFORM_ID`: the host system's own provider and platform (A161). */
  readonly hostSystem: { readonly providerId: string; readonly platformId: string };
  /** `AUTH_*`: the OAuth2 resource server, or (no `AUTH_ISSUER`) the local development issuer. */
  readonly auth: AuthConfig;
  /** `AUTH_ADMIN_DOMAIN`, default `Setup: Tenants`: the security domain of the tenant admin RPCs. */
  readonly adminDomain: string;
  /** The catalog's sign-in with AUTH_ISSUER (OpenID Connect authorization code + PKCE). */
  readonly ui: {
    /**
     * `UI_OIDC_CLIENT_ID`: the catalog's public client at AUTH_ISSUER, whose redirect URI is
     * `<the registry's origin>/ui/callback`. Unset with AUTH_ISSUER: the catalog cannot sign anyone in.
     */
    readonly oidcClientId: string | undefined;
    /** `UI_OIDC_SCOPE`, default `openid`: the scopes the catalog asks for (space-separated). */
    readonly oidcScope: string;
    /** `UI_OIDC_RESOURCE`: an RFC 8707 resource indicator the catalog sends (issuers that pick the audience by it). */
    readonly oidcResource: string | undefined;
  };
  /** The keys the registry signs the agent cards it serves with (issue 43; docs/operations.md, "Card signing"). */
  readonly cardSigning: {
    /** `CARD_SIGNING_KEY_FILE`: a private JWK (ES256 or EdDSA, with a `kid`) the registry signs cards with. */
    readonly keyFile: string | undefined;
    /**
     * `CARD_SIGNING_KEYS_DIR`: a directory of private JWKs (`*.jwk`, `*.json`), each with a `kid` and, but for
     * the first, an `nbf` (seconds) from which it signs. Neither set: a P-256 key made on first start in
     * `DATA_DIR/card-signing.jwk`.
     */
    readonly keysDir: string | undefined;
    /**
     * `CARD_SIGNING_KEY_OVERLAP_SECONDS`, default 604800 (7 days): how long a key stays in the JWKS after the
     * next key's `nbf`, so a card signed before the rotation still verifies.
     */
    readonly overlapSeconds: number;
  };
}

/** Thrown with every bad setting listed, so one start shows them all. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  }
}

export function parseConfig(env: Readonly<Record<string, string | undefined>>): Config {
  const problems: string[] = [];
  const reader = envReader(env, problems);
  const { integer } = reader;
  // Read in this order, so that a start lists its problems in the order of the settings.
  const limits = readLimits(integer, problems);
  const http = readHttp(integer, problems);
  const search = readSearch(integer, problems);
  const pageMaxBytes = integer("PAGE_MAX_BYTES", defaultPageMaxBytes, 64 * 1024, 256 * 1024 * 1024);
  const healthMaxWatches = integer("HEALTH_MAX_WATCHES", 1_000, 0, 100_000);
  const healthMaxWatchesPerConnection = integer("HEALTH_MAX_WATCHES_PER_CONNECTION", 10, 0, 100_000);
  const metricsPort =
    env.METRICS_PORT === undefined || env.METRICS_PORT === "" ? undefined : integer("METRICS_PORT", 0, 0, 65535);
  if (metricsPort !== undefined && metricsPort !== 0 && metricsPort === limits.port)
    problems.push(`METRICS_PORT (${metricsPort}) must differ from PORT`);
  // Node refuses a headers timeout longer than the request timeout it is part of.
  if (http.headersTimeoutMs > http.requestTimeoutMs)
    problems.push(
      `HTTP_HEADERS_TIMEOUT_MS (${http.headersTimeoutMs}) must not exceed HTTP_REQUEST_TIMEOUT_MS ` +
        `(${http.requestTimeoutMs})`,
    );
  const shutdownTimeoutMs = integer("SHUTDOWN_TIMEOUT_MS", 10_000, 0, 600_000);
  const watch = readWatch(integer, limits.maxConnections, problems);
  const probe = readProbe(env, reader, problems);
  const databases = readDatabaseUrls(env, problems);
  const names = readNames(env, problems);
  const auth = parseAuthConfig(env);
  problems.push(...auth.problems);
  const host = env.HOST || "127.0.0.1";
  // The local development issuer's key mints any token: off loopback only when asked for.
  const devIssuer = devIssuerProblem(host, auth.config);
  if (devIssuer !== undefined) problems.push(devIssuer);
  const adminDomain = env.AUTH_ADMIN_DOMAIN?.trim() || "Setup: Tenants";
  const ui = readUi(env, problems);
  const publicUrl = readPublicUrl(env.PUBLIC_URL, problems);
  const cardSigning = readCardSigning(env, integer, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    auth: auth.config,
    adminDomain,
    ...limits,
    host,
    ...databases,
    dataDir: env.DATA_DIR || "./data",
    defaultTenant: names.defaultTenant,
    http,
    search,
    pageMaxBytes,
    healthMaxWatches,
    healthMaxWatchesPerConnection,
    metricsPort,
    publicUrl,
    logLevel: names.logLevel,
    shutdownTimeoutMs,
    watch,
    probe,
    hostSystem: names.hostSystem,
    ui,
    cardSigning,
  };
}

/** `PUBLIC_URL`, without a trailing `/`; undefined when unset. */
function readPublicUrl(value: string | undefined, problems: string[]): string | undefined {
  if (value === undefined || value === "") return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    problems.push(`PUBLIC_URL must be an absolute http(s) URL, not "${value}"`);
    return undefined;
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.search !== "" || url.hash !== "" || url.username)
    problems.push(`PUBLIC_URL must be an http(s) URL without user, query or fragment, not "${value}"`);
  return `${url.origin}${url.pathname.replace(/\/+$/, "")}`;
}

/** Where the data lives, for the start-up line: never the password. */
export function describeStorage(config: Config): string {
  if (config.databaseUrl === undefined) return `embedded SQLite in ${config.dataDir}/registry.sqlite`;
  const where = (url: string) => {
    const { hosts, database } = parseDatabaseUrl(url);
    const at = hosts.map(({ host, port }) => `${host.includes(":") ? `[${host}]` : host}:${port}`).join(",");
    return `${at}/${database}`;
  };
  const writes = config.databaseWriteUrl === undefined ? "" : `, writes at ${where(config.databaseWriteUrl)}`;
  return `MySQL at ${where(config.databaseUrl)}${writes}`;
}
