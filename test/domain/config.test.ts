import { availableParallelism } from "node:os";
import { describe, expect, it } from "vitest";
import { ConfigError, describeStorage, parseConfig } from "../../src/config.js";
import { defaultSqliteSearchWorkers } from "../../src/storage/run/sqlite-search-worker.js";

describe("configuration", () => {
  it("defaults to the embedded database on 127.0.0.1:8080", () => {
    const config = parseConfig({});
    expect(config).toMatchObject({
      port: 8080,
      host: "127.0.0.1",
      databaseUrl: undefined,
      dataDir: "./data",
      defaultTenant: "default",
      maxBodyBytes: 1048576,
    });
    expect(describeStorage(config)).toBe("embedded SQLite in ./data/registry.sqlite");
  });

  it("lists every bad setting at once", () => {
    let err: unknown;
    try {
      parseConfig({ PORT: "eighty", DATABASE_URL: "postgres://x/y", LOG_LEVEL: "loud", DEFAULT_TENANT: "no spaces" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems).toHaveLength(4);
  });

  it("waits for causal reads on a Galera node by default (DATABASE_SYNC_WAIT 1), 0 to 15", () => {
    expect(parseConfig({}).databaseSyncWait).toBe(1);
    expect(parseConfig({ DATABASE_SYNC_WAIT: "0" }).databaseSyncWait).toBe(0);
    expect(() => parseConfig({ DATABASE_SYNC_WAIT: "16" })).toThrow(/DATABASE_SYNC_WAIT/);
  });

  it("checkpoints SQLite's WAL on a thread every 250 ms by default (SQLITE_CHECKPOINT_INTERVAL_MS), 0 to 60 s", () => {
    expect(parseConfig({}).sqliteCheckpointIntervalMs).toBe(250);
    expect(parseConfig({ SQLITE_CHECKPOINT_INTERVAL_MS: "0" }).sqliteCheckpointIntervalMs).toBe(0);
    expect(() => parseConfig({ SQLITE_CHECKPOINT_INTERVAL_MS: "60001" })).toThrow(/SQLITE_CHECKPOINT_INTERVAL_MS/);
  });

  it("takes PUBLIC_URL without a trailing slash, and refuses one that is not an http(s) URL of its own", () => {
    expect(parseConfig({}).publicUrl).toBeUndefined();
    expect(parseConfig({ PUBLIC_URL: "https://registry.example.com/" }).publicUrl).toBe("https://registry.example.com");
    expect(parseConfig({ PUBLIC_URL: "https://gw.example.com/reg/" }).publicUrl).toBe("https://gw.example.com/reg");
    for (const bad of ["registry.example.com", "ftp://x.example", "https://x.example/?a=1", "https://u:p@x.example"])
      expect(() => parseConfig({ PUBLIC_URL: bad }), bad).toThrow(/PUBLIC_URL must be/);
  });

  it("signs cards with the key in DATA_DIR by default, a retired key published 7 days; one key source at most", () => {
    expect(parseConfig({}).cardSigning).toEqual({ keyFile: undefined, keysDir: undefined, overlapSeconds: 604_800 });
    const set = parseConfig({ CARD_SIGNING_KEYS_DIR: "/keys", CARD_SIGNING_KEY_OVERLAP_SECONDS: "0" }).cardSigning;
    expect(set).toEqual({ keyFile: undefined, keysDir: "/keys", overlapSeconds: 0 });
    expect(() => parseConfig({ CARD_SIGNING_KEY_FILE: "/k.jwk", CARD_SIGNING_KEYS_DIR: "/keys" })).toThrow(
      /CARD_SIGNING_KEY_FILE and CARD_SIGNING_KEYS_DIR/,
    );
    expect(() => parseConfig({ CARD_SIGNING_KEY_OVERLAP_SECONDS: "-1" })).toThrow(/CARD_SIGNING_KEY_OVERLAP_SECONDS/);
  });

  it("probes every 5 minutes by default, and refuses a bad PROBE_ALLOW or per-host limit", () => {
    expect(parseConfig({}).probe).toMatchObject({
      enabled: true,
      intervalMs: 300_000,
      timeoutMs: 5_000,
      maxBodyBytes: 262_144,
      maxRedirects: 3,
      concurrency: 16,
      concurrencyPerHost: 4,
      downAfter: 2,
      allow: { ranges: [], hosts: new Set() },
    });
    const set = parseConfig({
      PROBE_ENABLED: "false",
      PROBE_ALLOW: "127.0.0.0/8, agents.internal",
      PROBE_CONCURRENCY: "2",
    });
    expect(set.probe.enabled).toBe(false);
    expect(set.probe.allow.hosts).toEqual(new Set(["agents.internal"]));
    expect(set.probe.concurrencyPerHost).toBe(2);
    expect(() => parseConfig({ PROBE_ALLOW: "not a range/" })).toThrow(/PROBE_ALLOW/);
    expect(() => parseConfig({ PROBE_CONCURRENCY: "2", PROBE_CONCURRENCY_PER_HOST: "3" })).toThrow(
      /PROBE_CONCURRENCY_PER_HOST \(3\) must not exceed PROBE_CONCURRENCY \(2\)/,
    );
    expect(() => parseConfig({ PROBE_ENABLED: "sometimes" })).toThrow(/PROBE_ENABLED must be true or false/);
  });

  it("rechecks a watch's token every minute by default (WATCH_TOKEN_RECHECK_MS), 100 ms to an hour", () => {
    expect(parseConfig({}).watch.tokenRecheckMs).toBe(60_000);
    expect(parseConfig({ WATCH_TOKEN_RECHECK_MS: "100" }).watch.tokenRecheckMs).toBe(100);
    expect(() => parseConfig({ WATCH_TOKEN_RECHECK_MS: "0" })).toThrow(/WATCH_TOKEN_RECHECK_MS/);
    expect(() => parseConfig({ WATCH_TOKEN_RECHECK_MS: "3600001" })).toThrow(/WATCH_TOKEN_RECHECK_MS/);
  });

  it(
    "bounds the database and slow clients by default, and refuses a headers timeout longer than the request " +
      "timeout",
    () => {
      expect(parseConfig({})).toMatchObject({
        databaseTimeoutMs: 10_000,
        http: { headersTimeoutMs: 20_000, requestTimeoutMs: 60_000, http2IdleTimeoutMs: 120_000 },
      });
      expect(
        parseConfig({
          DATABASE_TIMEOUT_MS: "1500",
          HTTP_HEADERS_TIMEOUT_MS: "1000",
          HTTP_REQUEST_TIMEOUT_MS: "2000",
          HTTP2_IDLE_TIMEOUT_MS: "3000",
        }),
      ).toMatchObject({
        databaseTimeoutMs: 1500,
        http: { headersTimeoutMs: 1000, requestTimeoutMs: 2000, http2IdleTimeoutMs: 3000 },
      });
      const problems = (() => {
        try {
          parseConfig({ DATABASE_TIMEOUT_MS: "0", HTTP_HEADERS_TIMEOUT_MS: "5000", HTTP_REQUEST_TIMEOUT_MS: "4000" });
        } catch (e) {
          return (e as ConfigError).problems;
        }
        return [];
      })();
      expect(problems).toEqual([
        expect.stringContaining("DATABASE_TIMEOUT_MS"),
        expect.stringContaining("HTTP_HEADERS_TIMEOUT_MS (5000) must not exceed"),
      ]);
    },
  );

  it("gates searches below the database pool's size and limits their time, refusing settings that would not", () => {
    expect(parseConfig({}).search).toEqual({
      maxConcurrent: 4,
      maxPerTenant: 2,
      timeoutMs: 10_000,
      sqliteWorkers: defaultSqliteSearchWorkers,
    });
    // One less than the cores, 1 to 4: the event loop keeps a core while searches run on SQLite.
    expect(defaultSqliteSearchWorkers).toBe(Math.max(1, Math.min(4, availableParallelism() - 1)));
    expect(
      parseConfig({
        SEARCH_MAX_CONCURRENT: "9",
        SEARCH_MAX_PER_TENANT: "3",
        SEARCH_TIMEOUT_MS: "0",
        SEARCH_SQLITE_WORKERS: "3",
      }).search,
    ).toEqual({
      maxConcurrent: 9,
      maxPerTenant: 3,
      timeoutMs: 0,
      sqliteWorkers: 3,
    });
    // The default per tenant gives way to a gate of one slot.
    expect(parseConfig({ SEARCH_MAX_CONCURRENT: "1" }).search).toMatchObject({ maxConcurrent: 1, maxPerTenant: 1 });
    const problems = (env: Record<string, string>) => {
      try {
        parseConfig(env);
      } catch (e) {
        return (e as ConfigError).problems;
      }
      return [];
    };
    expect(problems({ SEARCH_MAX_CONCURRENT: "10", SEARCH_TIMEOUT_MS: "-1" })).toEqual([
      expect.stringContaining("SEARCH_TIMEOUT_MS must be an integer from 0 to"),
      `SEARCH_MAX_CONCURRENT (10) must be below the database pool's 10 connections, so searches always leave some ` +
        `to reads and writes`,
    ]);
    expect(problems({ SEARCH_MAX_CONCURRENT: "0" })).toEqual([
      expect.stringContaining("SEARCH_MAX_CONCURRENT must be an integer from 1 to"),
    ]);
    expect(problems({ SEARCH_SQLITE_WORKERS: "0" })).toEqual([
      expect.stringContaining("SEARCH_SQLITE_WORKERS must be an integer from 1 to 64"),
    ]);
    expect(problems({ SEARCH_MAX_CONCURRENT: "2.5" })).toHaveLength(1);
    expect(problems({ SEARCH_MAX_CONCURRENT: "3", SEARCH_MAX_PER_TENANT: "4" })).toEqual([
      "SEARCH_MAX_PER_TENANT (4) must not exceed SEARCH_MAX_CONCURRENT (3)",
    ]);
    expect(problems({ SEARCH_MAX_PER_TENANT: "0" })).toEqual([
      expect.stringContaining("SEARCH_MAX_PER_TENANT must be an integer from 1 to"),
    ]);
  });

  it(
    "bounds the memory clients hold by default (bytes in flight, connections, body time, watches per connection), " +
      "refusing settings that contradict",
    () => {
      expect(parseConfig({})).toMatchObject({
        maxBufferedBodyBytes: 16 * 1024 * 1024,
        maxConnections: 1000,
        healthMaxWatchesPerConnection: 10,
        http: { bodyTimeoutMs: 10_000 },
      });
      // The body deadline is within the request's: a shorter request timeout shortens the default.
      expect(parseConfig({ HTTP_REQUEST_TIMEOUT_MS: "2000", HTTP_HEADERS_TIMEOUT_MS: "1000" }).http.bodyTimeoutMs).toBe(
        2000,
      );
      const problems = (env: Record<string, string>) => {
        try {
          parseConfig(env);
        } catch (e) {
          return (e as ConfigError).problems;
        }
        return [];
      };
      expect(
        problems({
          MAX_BUFFERED_BODY_BYTES: "2048",
          MAX_BODY_BYTES: "4096",
          HTTP_BODY_TIMEOUT_MS: "70000",
          MAX_CONNECTIONS: "0",
        }),
      ).toEqual([
        expect.stringContaining("MAX_BUFFERED_BODY_BYTES (2048) must be at least MAX_BODY_BYTES (4096)"),
        expect.stringContaining("MAX_CONNECTIONS must be an integer from 1 to"),
        "HTTP_BODY_TIMEOUT_MS (70000) must not exceed HTTP_REQUEST_TIMEOUT_MS (60000)",
      ]);
    },
  );

  it("limits watches per caller, per tenant (over HTTP/1.1 too) and per process, one tenant below the process", () => {
    // Defaults: 1,000 watchers of distinct callers fit in one tenant, and one tenant holds at most half the process's.
    expect(parseConfig({}).watch).toMatchObject({
      maxOpen: 2500,
      maxPerTenant: 1250,
      maxPerToken: 100,
      maxHttp1PerTenant: 500,
    });
    // The defaults give way to smaller settings above them.
    expect(parseConfig({ WATCH_MAX_OPEN: "10", MAX_CONNECTIONS: "100" }).watch).toMatchObject({
      maxOpen: 10,
      maxPerTenant: 5,
      maxPerToken: 5,
      maxHttp1PerTenant: 5,
    });
    const problems = (env: Record<string, string>) => {
      try {
        parseConfig(env);
      } catch (e) {
        return (e as ConfigError).problems;
      }
      return [];
    };
    expect(
      problems({
        WATCH_MAX_OPEN: "100",
        WATCH_MAX_PER_TENANT: "100",
        WATCH_MAX_PER_TOKEN: "101",
        MAX_CONNECTIONS: "50",
        WATCH_MAX_HTTP1_PER_TENANT: "50",
      }),
    ).toEqual([
      "WATCH_MAX_PER_TENANT (100) must be below WATCH_MAX_OPEN (100)",
      "WATCH_MAX_PER_TOKEN (101) must not exceed WATCH_MAX_PER_TENANT (100)",
      "WATCH_MAX_HTTP1_PER_TENANT (50) must be below MAX_CONNECTIONS (50)",
    ]);
    expect(problems({ WATCH_MAX_OPEN: "1" })).toEqual([
      expect.stringContaining("WATCH_MAX_OPEN must be an integer from 2 to"),
    ]);
  });

  it("takes a DATABASE_URL of several hosts, and refuses one with a host that is not one", () => {
    const url = "mysql://app:s3cret@db1.internal:3307,db2.internal,[::1]:3309/registry";
    const config = parseConfig({ DATABASE_URL: url });
    expect(config.databaseUrl).toBe(url);
    expect(describeStorage(config)).toBe("MySQL at db1.internal:3307,db2.internal:3306,[::1]:3309/registry");
    for (const bad of ["mysql://app@db1:3306,,db2/registry", "mysql://app@db1:3306,db2:port/registry"]) {
      expect(() => parseConfig({ DATABASE_URL: bad }), bad).toThrow(/DATABASE_URL names a host that is not one/);
    }
  });

  it("takes a DATABASE_WRITE_URL for the writes beside DATABASE_URL, and refuses one without it or not mysql", () => {
    const config = parseConfig({
      DATABASE_URL: "mysql://app:s3cret@db2:3306,db3:3306,db1:3306/registry",
      DATABASE_WRITE_URL: "mysql://app:s3cret@db1:3306,db2:3306,db3:3306/registry",
    });
    expect(config.databaseWriteUrl).toBe("mysql://app:s3cret@db1:3306,db2:3306,db3:3306/registry");
    expect(describeStorage(config)).toBe(
      "MySQL at db2:3306,db3:3306,db1:3306/registry, writes at db1:3306,db2:3306,db3:3306/registry",
    );
    expect(parseConfig({ DATABASE_URL: "mysql://app@db1/registry", DATABASE_WRITE_URL: "" }).databaseWriteUrl).toBe(
      undefined,
    );
    expect(() => parseConfig({ DATABASE_WRITE_URL: "mysql://app@db1/registry" })).toThrow(
      /DATABASE_WRITE_URL needs DATABASE_URL/,
    );
    expect(() =>
      parseConfig({ DATABASE_URL: "mysql://app@db1/registry", DATABASE_WRITE_URL: "postgres://db1/registry" }),
    ).toThrow(/DATABASE_WRITE_URL must be a mysql:\/\/ URL/);
  });

  it("never shows the database password", () => {
    const config = parseConfig({ DATABASE_URL: "mysql://app:s3cret@db.internal:3307/registry" });
    expect(describeStorage(config)).toBe("MySQL at db.internal:3307/registry");
  });
});
