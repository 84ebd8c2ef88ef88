/**
 * Who called, and the mapping from a token's claims (of a verified JWT or an
 * introspection response) to that caller.
 */

import { DEFAULT_PLATFORM_ADMIN_CLAIM } from "./auth-config.js";
import { unauthenticated } from "./auth-errors.js";

/** Who called, as far as the registry cares. */
export interface Principal {
  /** `sub` (or `client_id`): for logs. */
  readonly subject: string;
  /**
   * The client the token was issued to (`client_id`, else `azp`), when it says: with `subject`, who holds the
   * token's watch allowance (operations/watch-limits.ts).
   */
  readonly client?: string | undefined;
  /** The tenant claim; null when the token has none (a claim that is there is a non-empty string, else 401). */
  readonly tenant: string | null;
  /** Security domains: from the domains claim plus the scope-to-domain map. */
  readonly domains: ReadonlySet<string>;
  /** The platform admin claim is `true`: a platform operator, the only callers the tenant admin RPCs admit. */
  readonly platformAdmin: boolean;
  /**
   * When the token expires (its `exp`, in milliseconds since the epoch); undefined when it has none. A
   * watch ends with UNAUTHENTICATED then (issue 20).
   */
  readonly expiresAt?: number | undefined;
  /**
   * No token was sent: a caller admitted only to a tenant's public discovery (issue 45), which its operation
   * checks against the tenant's `discovery` setting.
   */
  readonly anonymous?: boolean | undefined;
}

/** The caller of a discovery read that sent no token: no tenant, no domain. */
export const ANONYMOUS: Principal = Object.freeze({
  subject: "anonymous",
  tenant: null,
  domains: new Set<string>(),
  platformAdmin: false,
  anonymous: true,
});

/** Which claims carry the tenant and the domains, and which scopes grant which domains. */
export interface ClaimMapping {
  readonly tenantClaim: string;
  readonly domainsClaim: string;
  readonly scopeDomains: ReadonlyMap<string, readonly string[]>;
  /** The claim that, when JSON `true`, marks a platform administrator; default `platform_admin`. */
  readonly platformAdminClaim?: string;
}

/**
 * Builds the principal from verified claims. A tenant or domains claim of the
 * wrong type makes the token unusable (401): guessing could grant too much.
 */
export function principalFromClaims(claims: Readonly<Record<string, unknown>>, mapping: ClaimMapping): Principal {
  const subject =
    [claims.sub, claims.client_id].find((v): v is string => typeof v === "string" && v !== "") ?? "(no subject)";

  // A claim that is there names a tenant or the token is unusable: "" or null is not "no tenant"
  // (which would make the token act on the default tenant, and once made it a platform operator's).
  const tenantValue = claims[mapping.tenantClaim];
  if (tenantValue !== undefined && (typeof tenantValue !== "string" || tenantValue === "")) {
    throw unauthenticated(
      `The bearer token's "${mapping.tenantClaim}" claim is not a tenant name (a non-empty string); leave it out ` +
        `or name the tenant.`,
    );
  }
  const tenant = tenantValue ?? null;

  const domains = new Set<string>();
  const domainsValue = claims[mapping.domainsClaim];
  if (typeof domainsValue === "string") {
    for (const name of domainsValue.split(",")) if (name.trim() !== "") domains.add(name.trim());
  } else if (Array.isArray(domainsValue) && domainsValue.every((d) => typeof d === "string")) {
    for (const name of domainsValue as string[]) if (name.trim() !== "") domains.add(name.trim());
  } else if (domainsValue !== undefined && domainsValue !== null) {
    throw unauthenticated(
      `The bearer token's "${mapping.domainsClaim}" claim is neither a list of names nor a comma-separated string.`,
    );
  }

  for (const scope of scopesOf(claims)) for (const name of mapping.scopeDomains.get(scope) ?? []) domains.add(name);

  const adminClaim = mapping.platformAdminClaim ?? DEFAULT_PLATFORM_ADMIN_CLAIM;
  const adminValue = claims[adminClaim];
  if (adminValue !== undefined && adminValue !== null && typeof adminValue !== "boolean") {
    throw unauthenticated(`The bearer token's "${adminClaim}" claim is not true or false.`);
  }

  const client = [claims.client_id, claims.azp].find((v): v is string => typeof v === "string" && v !== "");
  const principal: Principal = {
    subject,
    tenant,
    domains,
    platformAdmin: adminValue === true,
    ...(client === undefined ? {} : { client }),
  };
  return typeof claims.exp === "number" ? { ...principal, expiresAt: claims.exp * 1000 } : principal;
}

/** The granted scopes: `scope` (space-separated, RFC 9068/7662) or `scp` (a list or a string, as some issuers send). */
function scopesOf(claims: Readonly<Record<string, unknown>>): string[] {
  const scopes: string[] = [];
  for (const value of [claims.scope, claims.scp]) {
    if (typeof value === "string") scopes.push(...value.split(" ").filter((s) => s !== ""));
    else if (Array.isArray(value)) scopes.push(...value.filter((s): s is string => typeof s === "string"));
  }
  return scopes;
}
