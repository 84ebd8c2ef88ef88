// AUTH_* settings: explicit, safe defaults; insecure choices refused or opt-in;
// every bad variable listed.
import { describe, expect, it } from "vitest";
import { devIssuerProblem, isLoopbackHost, parseAuthConfig } from "../../src/auth/auth-config.js";

describe("parseAuthConfig", () => {
  it("defaults to the local development issuer with explicit, safe settings", () => {
    const { config, problems } = parseAuthConfig({});
    expect(problems).toEqual([]);
    expect(config).toEqual({
      issuer: undefined,
      audience: "asor",
      tenantClaim: "tenant",
      domainsClaim: "domains",
      scopeDomains: new Map(),
      algorithms: ["RS256", "PS256", "ES256", "EdDSA"],
      clockSkewSeconds: 30,
      introspection: undefined,
      introspectionCacheSeconds: 10,
      allowHttpIssuer: false,
      allowDevIssuer: false,
      requireAccessTokenTyp: true,
      maxTokenLifetimeSeconds: 86_400,
      introspectionRequireIssAud: true,
      introspectionMaxPerSecond: 20,
      // The development mode only: there every token is the developer's own.
      noTenantClaimUsesDefault: true,
      platformAdminClaim: "platform_admin",
    });
  });

  it(
    "lets a token without the tenant claim act on the default tenant only in the development mode, unless " + "told",
    () => {
      expect(parseAuthConfig({ AUTH_ISSUER: "https://i.example" }).config.noTenantClaimUsesDefault).toBe(false);
      expect(
        parseAuthConfig({ AUTH_ISSUER: "https://i.example", AUTH_NO_TENANT_CLAIM_USES_DEFAULT: "true" }).config
          .noTenantClaimUsesDefault,
      ).toBe(true);
      expect(parseAuthConfig({ AUTH_NO_TENANT_CLAIM_USES_DEFAULT: "false" }).config.noTenantClaimUsesDefault).toBe(
        false,
      );
    },
  );

  it("reads the token-check settings, listing bad values", () => {
    const { config, problems } = parseAuthConfig({
      AUTH_REQUIRE_AT_JWT_TYP: "false",
      AUTH_MAX_TOKEN_LIFETIME_SECONDS: "3600",
      AUTH_INTROSPECTION_REQUIRE_ISS_AUD: "false",
      AUTH_INTROSPECTION_MAX_PER_SECOND: "100",
      AUTH_PLATFORM_ADMIN_CLAIM: "ops",
      AUTH_ALLOW_DEV_ISSUER: "true",
    });
    expect(problems).toEqual([]);
    expect(config).toMatchObject({
      requireAccessTokenTyp: false,
      maxTokenLifetimeSeconds: 3600,
      introspectionRequireIssAud: false,
      introspectionMaxPerSecond: 100,
      platformAdminClaim: "ops",
      allowDevIssuer: true,
    });
    expect(
      parseAuthConfig({
        AUTH_REQUIRE_AT_JWT_TYP: "no",
        AUTH_MAX_TOKEN_LIFETIME_SECONDS: "59",
        AUTH_INTROSPECTION_MAX_PER_SECOND: "0",
        AUTH_ALLOW_DEV_ISSUER: "1",
      }).problems,
    ).toEqual([
      'AUTH_ALLOW_DEV_ISSUER must be true or false, not "1"',
      'AUTH_REQUIRE_AT_JWT_TYP must be true or false, not "no"',
      'AUTH_MAX_TOKEN_LIFETIME_SECONDS must be an integer from 60 to 31536000, not "59"',
      'AUTH_INTROSPECTION_MAX_PER_SECOND must be an integer from 1 to 1000, not "0"',
    ]);
  });
  it("reads every variable", () => {
    const { config, problems } = parseAuthConfig({
      AUTH_ISSUER: "https://login.example.com/realms/acme",
      AUTH_AUDIENCE: "registry",
      AUTH_TENANT_CLAIM: "org",
      AUTH_DOMAINS_CLAIM: "roles",
      AUTH_SCOPE_DOMAINS: '{"asor.read":["Setup: Agents"],"asor.write":["Development"]}',
      AUTH_ALGORITHMS: "ES256, RS256",
      AUTH_CLOCK_SKEW_SECONDS: "5",
      AUTH_INTROSPECTION_CLIENT_ID: "registry",
      AUTH_INTROSPECTION_CLIENT_SECRET: "s3cret",
      AUTH_INTROSPECTION_CACHE_SECONDS: "0",
    });
    expect(problems).toEqual([]);
    expect(config.issuer?.href).toBe("https://login.example.com/realms/acme");
    expect(config).toMatchObject({
      audience: "registry",
      tenantClaim: "org",
      domainsClaim: "roles",
      algorithms: ["ES256", "RS256"],
      clockSkewSeconds: 5,
    });
    expect(config.scopeDomains).toEqual(
      new Map([
        ["asor.read", ["Setup: Agents"]],
        ["asor.write", ["Development"]],
      ]),
    );
    expect(config.introspection).toEqual({ clientId: "registry", clientSecret: "s3cret" });
    expect(config.introspectionCacheSeconds).toBe(0);
  });

  it("takes an introspection cache time from 0 to 60 seconds only", () => {
    expect(parseAuthConfig({ AUTH_INTROSPECTION_CACHE_SECONDS: "60" }).config.introspectionCacheSeconds).toBe(60);
    for (const bad of ["61", "-1", "1.5", "ten"]) {
      const { config, problems } = parseAuthConfig({ AUTH_INTROSPECTION_CACHE_SECONDS: bad });
      expect(problems).toEqual([`AUTH_INTROSPECTION_CACHE_SECONDS must be an integer from 0 to 60, not "${bad}"`]);
      expect(config.introspectionCacheSeconds).toBe(10);
    }
  });

  it("refuses none and HMAC algorithms, and unknown ones", () => {
    const { problems } = parseAuthConfig({ AUTH_ALGORITHMS: "none,HS256,RS256,XX1" });
    expect(problems).toHaveLength(3);
    expect(problems[0]).toMatch(/"none"/);
    expect(problems[1]).toMatch(/HS256: HMAC is refused/);
    expect(problems[2]).toMatch(/unknown algorithm "XX1"/);
  });

  it("refuses an http:// issuer unless AUTH_ALLOW_HTTP_ISSUER=true", () => {
    expect(parseAuthConfig({ AUTH_ISSUER: "http://127.0.0.1:8081" }).problems).toEqual([
      'AUTH_ISSUER "http://127.0.0.1:8081/" uses http://; ' +
        "set AUTH_ALLOW_HTTP_ISSUER=true to allow that (never in production)",
    ]);
    const allowed = parseAuthConfig({ AUTH_ISSUER: "http://127.0.0.1:8081", AUTH_ALLOW_HTTP_ISSUER: "true" });
    expect(allowed.problems).toEqual([]);
    expect(allowed.config.allowHttpIssuer).toBe(true);
  });

  it("needs both introspection credentials or neither, and an issuer for them", () => {
    expect(parseAuthConfig({ AUTH_ISSUER: "https://i.example", AUTH_INTROSPECTION_CLIENT_ID: "x" }).problems).toEqual([
      "AUTH_INTROSPECTION_CLIENT_ID and AUTH_INTROSPECTION_CLIENT_SECRET must be set together (or neither)",
    ]);
    expect(
      parseAuthConfig({ AUTH_INTROSPECTION_CLIENT_ID: "x", AUTH_INTROSPECTION_CLIENT_SECRET: "y" }).problems,
    ).toEqual(["AUTH_INTROSPECTION_CLIENT_ID is set but AUTH_ISSUER is not: introspection needs an issuer"]);
  });

  it("lists every bad variable at once, never echoing the introspection secret", () => {
    const secret = "do-not-print-me";
    const { problems } = parseAuthConfig({
      AUTH_ISSUER: "not a url",
      AUTH_SCOPE_DOMAINS: '{"asor.read":"Setup: Agents"}',
      AUTH_CLOCK_SKEW_SECONDS: "3600",
      AUTH_ALLOW_HTTP_ISSUER: "yes",
      AUTH_TENANT_CLAIM: "has space",
      AUTH_INTROSPECTION_CLIENT_SECRET: secret,
      AUTH_INTROSPECTION_CACHE_SECONDS: "3600",
    });
    expect(problems.map((p) => p.split(" ")[0])).toEqual([
      "AUTH_ALLOW_HTTP_ISSUER",
      "AUTH_ISSUER",
      "AUTH_TENANT_CLAIM",
      "AUTH_SCOPE_DOMAINS",
      "AUTH_CLOCK_SKEW_SECONDS",
      "AUTH_INTROSPECTION_CLIENT_ID",
      "AUTH_INTROSPECTION_CACHE_SECONDS",
    ]);
    expect(problems.join("\n")).not.toContain(secret);
  });
});

describe("the development issuer and HOST", () => {
  it("knows the loopback hosts", () => {
    for (const host of ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]", "::ffff:127.0.0.1"])
      expect(isLoopbackHost(host), host).toBe(true);
    for (const host of ["0.0.0.0", "::", "10.0.0.1", "registry.example.com", "128.0.0.1"])
      expect(isLoopbackHost(host), host).toBe(false);
  });

  it("is a start-up problem off loopback without AUTH_ISSUER, unless AUTH_ALLOW_DEV_ISSUER=true", () => {
    expect(devIssuerProblem("0.0.0.0", parseAuthConfig({}).config)).toMatch(
      /^HOST "0.0.0.0" is not a loopback address and AUTH_ISSUER is unset: set AUTH_ISSUER/,
    );
    expect(devIssuerProblem("127.0.0.1", parseAuthConfig({}).config)).toBeUndefined();
    expect(devIssuerProblem("0.0.0.0", parseAuthConfig({ AUTH_ALLOW_DEV_ISSUER: "true" }).config)).toBeUndefined();
    expect(devIssuerProblem("0.0.0.0", parseAuthConfig({ AUTH_ISSUER: "https://i.example" }).config)).toBeUndefined();
  });
});
