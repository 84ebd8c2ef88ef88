/**
 * Issue 25, item 7: a designed refusal (here the introspection rate limit,
 * AUTH_INTROSPECTION_MAX_PER_SECOND, against a real OpenID provider) is the
 * service working as intended. A flood of them is answered 503 each, but logged
 * as one `warn` line with their count, never as an `error` line per request.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { capturingLogger } from "../support/capturing-logger.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { AUDIENCE, startOidcProvider, type TestIssuer } from "../support/oidc-provider.js";
import { startServer } from "../support/server.js";

describe("refusals by design in the log", () => {
  let issuer: TestIssuer;
  let database: FreshDatabase;
  beforeAll(async () => {
    issuer = await startOidcProvider([]);
    database = await testDatabases()[0]!.create();
  });
  afterAll(async () => {
    await database?.cleanup();
    await issuer?.close();
  });

  it("answers each refused request 503 and logs them at warn, once, with their count", async () => {
    const logger = capturingLogger();
    const server = await startServer(
      database,
      {
        AUTH_ISSUER: issuer.issuer,
        AUTH_ALLOW_HTTP_ISSUER: "true",
        AUTH_AUDIENCE: AUDIENCE,
        AUTH_INTROSPECTION_CLIENT_ID: issuer.introspector.clientId,
        AUTH_INTROSPECTION_CLIENT_SECRET: issuer.introspector.clientSecret,
        AUTH_INTROSPECTION_MAX_PER_SECOND: "1",
      },
      logger,
    );
    let refused = 0;
    try {
      // Unknown opaque tokens, all at once: one is introspected (and is not active), the rest exceed the rate.
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          fetch(`${server.baseUrl}/asor/v1/agentDefinition`, {
            headers: { authorization: `Bearer opaque-token-${i}-unknown` },
          }),
        ),
      );
      const statuses = answers.map((a) => a.status);
      refused = statuses.filter((s) => s === 503).length;
      expect(refused).toBeGreaterThan(0);
      expect(statuses.every((s) => s === 503 || s === 401)).toBe(true);
    } finally {
      // Stopping tells the refusals counted since the last summary line.
      await server.stop();
    }
    const problems = logger.lines.filter((l) => l.level === "error" || l.level === "warn");
    expect(problems).toEqual([
      expect.objectContaining({ level: "warn", message: "requests refused", code: "UNAVAILABLE", count: refused }),
    ]);
    expect(problems[0]?.reason).toMatch(/Too many unknown opaque tokens/);
  });
});
