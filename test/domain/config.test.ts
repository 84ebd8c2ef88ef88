import { describe, expect, it } from "vitest";
import { ConfigError, describeStorage, parseConfig } from "../../src/config.js";

describe("configuration", () => {
  it("defaults to the embedded database on 127.0.0.1:8080", () => {
    const config = parseConfig({});
    expect(config).toMatchObject({ port: 8080, host: "127.0.0.1", databaseUrl: undefined, dataDir: "./data", defaultTenant: "default", maxBodyBytes: 1048576 });
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

  it("never shows the database password", () => {
    const config = parseConfig({ DATABASE_URL: "mysql://app:s3cret@db.internal:3307/registry" });
    expect(describeStorage(config)).toBe("MySQL at db.internal:3307/registry");
  });
});
