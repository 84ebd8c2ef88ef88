import type { DescMethod } from "@bufbuild/protobuf";
import { createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import type { Authenticator, Principal } from "../auth/authenticator.js";
import { RegistryError } from "../domain/errors.js";
import { recordOf } from "../observability/request-record.js";

/** The security domains of SPEC.md §5. */
export const DEVELOPMENT = "Development";
export const SETUP_AGENTS = "Setup: Agents";

/** The authenticated caller of the current request. */
export const principalKey = createContextKey<Principal | undefined>(undefined, { description: "the authenticated caller" });

/** Which domains may call each RPC (any one of them suffices), by `Service/Method`. */
export type Policy = ReadonlyMap<string, readonly string[]>;

/**
 * The contract's reading of SPEC.md §5: list and upsert need Development or
 * Setup: Agents; get and the versions list need Setup: Agents. The tenant
 * admin RPCs need the admin domain. RPCs not listed are refused.
 */
export function registryPolicy(adminDomain: string): Policy {
  return new Map([
    ["asor.v1.AgentDefinitionService/ListAgentDefinitions", [DEVELOPMENT, SETUP_AGENTS]],
    ["asor.v1.AgentDefinitionService/UpsertAgentDefinition", [DEVELOPMENT, SETUP_AGENTS]],
    ["asor.v1.AgentDefinitionService/GetAgentDefinition", [SETUP_AGENTS]],
    ["asor.v1.AgentDefinitionService/ListAgentDefinitionVersions", [SETUP_AGENTS]],
    ["asor.v1.TenantAdminService/CreateTenant", [adminDomain]],
    ["asor.v1.TenantAdminService/ListTenants", [adminDomain]],
  ]);
}

export function forbidden(message: string): RegistryError {
  return new RegistryError("forbidden", "PERMISSION_DENIED", message, [{ code: "PERMISSION_DENIED", message }]);
}

/** Authenticates a call to `method` (401) and checks the caller's domains against the policy (403). */
export type AccessCheck = (authorization: string | null, method: DescMethod) => Promise<Principal>;

export function createAccessCheck(authenticator: Authenticator, policy: Policy): AccessCheck {
  return async (authorization, method) => {
    const principal = await authenticator.authenticate(authorization);
    const allowed = policy.get(`${method.parent.typeName}/${method.name}`) ?? [];
    if (!allowed.some((domain) => principal.domains.has(domain))) {
      const needs = allowed.length === 0 ? "is not open to any caller" : `needs the security domain ${allowed.map((d) => `"${d}"`).join(" or ")}`;
      throw forbidden(`${method.name} ${needs}.`);
    }
    return principal;
  };
}

/**
 * Runs the access check on every call before any handler runs, and leaves the
 * caller in the context for the tenant check (resolveTenant).
 */
export function authInterceptor(check: AccessCheck): Interceptor {
  return (next) => async (req) => {
    req.contextValues.set(principalKey, await check(req.header.get("authorization"), req.method));
    return next(req);
  };
}

/**
 * The tenant a request acts on, and the check that its caller may: a request
 * names its tenant, else the token's tenant is meant, else the default tenant.
 * A token with a tenant claim acts on that tenant only; a token without one on
 * the default tenant only.
 */
export function resolveTenant(requested: string, ctx: HandlerContext, defaultTenant: string): string {
  const principal = ctx.values.get(principalKey);
  if (principal === undefined) throw new Error("resolveTenant before authentication: the auth interceptor is not installed");
  const own = principal.tenant ?? defaultTenant;
  const tenant = requested || own;
  if (tenant !== own) throw forbidden(`The caller's token is for tenant "${own}", not "${tenant}".`);
  // The access log names the tenant a request acted on.
  const record = recordOf(ctx.values);
  if (record !== undefined) record.tenant = tenant;
  return tenant;
}
