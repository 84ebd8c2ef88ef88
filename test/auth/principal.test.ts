// From verified claims to the Principal: subject, tenant, and domains from the
// domains claim (list or comma-separated) plus the scope-to-domain map.
import { describe, expect, it } from "vitest";
import { type ClaimMapping, principalFromClaims } from "../../src/auth/principal.js";
import { RegistryError } from "../../src/domain/errors.js";

const mapping: ClaimMapping = {
  tenantClaim: "tenant",
  domainsClaim: "domains",
  scopeDomains: new Map([
    ["asor.read", ["Setup: Agents"]],
    ["asor.write", ["Development"]],
  ]),
};

describe("principalFromClaims", () => {
  it("reads the domains claim as a list or as a comma-separated string", () => {
    expect([...principalFromClaims({ sub: "a", domains: ["Development", "Setup: Agents"] }, mapping).domains]).toEqual([
      "Development",
      "Setup: Agents",
    ]);
    expect([...principalFromClaims({ sub: "a", domains: "Development, Setup: Agents" }, mapping).domains]).toEqual([
      "Development",
      "Setup: Agents",
    ]);
  });

  it("adds the domains of each granted scope, from scope (space-separated) or scp (a list)", () => {
    expect([...principalFromClaims({ sub: "a", scope: "openid asor.read" }, mapping).domains]).toEqual([
      "Setup: Agents",
    ]);
    expect(
      new Set(
        principalFromClaims({ sub: "a", scp: ["asor.read", "asor.write"], domains: ["Development"] }, mapping).domains,
      ),
    ).toEqual(new Set(["Development", "Setup: Agents"]));
  });

  it("uses the configured claim names", () => {
    const principal = principalFromClaims(
      { sub: "a", org: "acme", roles: ["Development"], tenant: "ignored" },
      { ...mapping, tenantClaim: "org", domainsClaim: "roles" },
    );
    expect(principal.tenant).toBe("acme");
    expect([...principal.domains]).toEqual(["Development"]);
  });

  it("names the subject by sub, else client_id", () => {
    expect(principalFromClaims({ sub: "user-1", client_id: "app" }, mapping).subject).toBe("user-1");
    expect(principalFromClaims({ client_id: "app" }, mapping).subject).toBe("app");
  });

  it(
    "has a null tenant only when the claim is absent; one that is there but not a non-empty string is refused " +
      "(401)",
    () => {
      expect(principalFromClaims({ sub: "a" }, mapping).tenant).toBeNull();
      for (const tenant of ["", null, 7, true, ["acme"], {}]) {
        expect(() => principalFromClaims({ sub: "a", tenant }, mapping), JSON.stringify(tenant)).toThrow(
          /"tenant" claim is not a tenant name/,
        );
      }
    },
  );

  it(
    "marks a platform admin only by the configured claim set to true, refusing (401) a claim that is not a " +
      "boolean",
    () => {
      expect(principalFromClaims({ sub: "a", platform_admin: true }, mapping).platformAdmin).toBe(true);
      expect(principalFromClaims({ sub: "a", platform_admin: false }, mapping).platformAdmin).toBe(false);
      expect(principalFromClaims({ sub: "a" }, mapping).platformAdmin).toBe(false);
      expect(
        principalFromClaims({ sub: "a", ops: true, platform_admin: true }, { ...mapping, platformAdminClaim: "ops" })
          .platformAdmin,
      ).toBe(true);
      expect(
        principalFromClaims({ sub: "a", platform_admin: true }, { ...mapping, platformAdminClaim: "ops" })
          .platformAdmin,
      ).toBe(false);
      expect(() => principalFromClaims({ sub: "a", platform_admin: "true" }, mapping)).toThrow(
        /"platform_admin" claim is not true or false/,
      );
    },
  );

  it("refuses (401) a domains claim that is neither a list of names nor a string", () => {
    const thrown = (() => {
      try {
        principalFromClaims({ sub: "a", domains: { Development: true } }, mapping);
      } catch (error: unknown) {
        return error;
      }
      return undefined;
    })();
    expect(thrown).toBeInstanceOf(RegistryError);
    expect(thrown).toMatchObject({ code: "UNAUTHENTICATED" });
  });
});
