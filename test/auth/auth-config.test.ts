// AUTH_* settings: explicit, safe defaults; insecure choices refused or opt-in;
// every bad variable listed.
import { describe, expect, it } from "vitest";
import { parseAuthConfig } from "../../src/auth/auth-config.js";

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
    });
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
    expect(config).toMatchObject({ audience: "registry", tenantClaim: "org", domainsClaim: "roles", algorithms: ["ES256", "RS256"], clockSkewSeconds: 5 });
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
      'AUTH_ISSUER "http://127.0.0.1:8081/" uses http://; set AUTH_ALLOW_HTTP_ISSUER=true to allow that (never in production)',
    ]);
    const allowed = parseAuthConfig({ AUTH_ISSUER: "http://127.0.0.1:8081", AUTH_ALLOW_HTTP_ISSUER: "true" });
    expect(allowed.problems).toEqual([]);
    expect(allowed.config.allowHttpIssuer).toBe(true);
  });

  it("needs both introspection credentials or neither, and an issuer for them", () => {
    expect(parseAuthConfig({ AUTH_ISSUER: "https://i.example", AUTH_INTROSPECTION_CLIENT_ID: "x" }).problems).toEqual([
      "AUTH_INTROSPECTION_CLIENT_ID and AUTH_INTROSPECTION_CLIENT_SECRET must be set together (or neither)",
    ]);
    expect(parseAuthConfig({ AUTH_INTROSPECTION_CLIENT_ID: "x", AUTH_INTROSPECTION_CLIENT_SECRET: "y" }).problems).toEqual([
      "AUTH_INTROSPECTION_CLIENT_ID is set but AUTH_ISSUER is not: introspection needs an issuer",
    ]);
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
