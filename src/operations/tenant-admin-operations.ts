/**
 * The operations of TenantAdminService. Setting up and listing tenants act on every tenant: platform
 * operations (Operation.platform), for a platform operator's token only. A tenant's settings and its
 * providers' keys (issue 43) belong to one tenant: a platform operator's token, or a token of that very
 * tenant with the admin domain, acts on them; another tenant's admin is refused (PERMISSION_DENIED) before
 * anything is read.
 */
import type { DescMessage, DescMethod } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import { ListTenantsResponseSchema, TenantAdminService } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import type { ProviderKeyService } from "../service/provider-key-service.js";
import type { TenantService } from "../service/tenant-service.js";
import { type Call, type Operation, resolveTenant, type Tenancy } from "./operation.js";

const admin = TenantAdminService.method;

/** Makes the operation of `method` that runs `run`: its policy's domains, its issues relative to its body. */
export type Define = <In extends DescMessage>(
  method: DescMethod & { readonly input: In },
  run: Operation<In>["run"],
) => Operation;

/** The RPCs that act on every tenant: only a platform operator is admitted (operation.ts admit). */
export const PLATFORM_METHODS: ReadonlySet<DescMethod> = new Set([admin.createTenant, admin.listTenants]);

/**
 * Checks that `call` may administer `tenant`: a platform operator may any; any other caller only its own
 * tenant, as for every tenant-scoped operation (resolveTenant: its token's tenant claim, or the default tenant
 * for a token without one where the operator allows that).
 */
export function adminTenant(tenant: string, call: Call, tenancy: Tenancy): void {
  if (!call.principal.platformAdmin) {
    resolveTenant(tenant, call, tenancy);
    return;
  }
  if (call.record !== undefined && tenant !== "") call.record.tenant = tenant;
}

export function tenantAdminOperations(
  operation: Define,
  tenants: TenantService,
  keys: ProviderKeyService,
  tenancy: Tenancy,
): Operation[] {
  const may = (tenant: string, call: Call) => adminTenant(tenant, call, tenancy);
  return [
    operation(admin.createTenant, async (_call, req) => ({ kind: "message", message: await tenants.create(req) })),
    operation(admin.listTenants, async () => ({
      kind: "message",
      message: create(ListTenantsResponseSchema, { tenants: await tenants.list() }),
    })),
    operation(admin.getTenant, async (call, req) => {
      may(req.name, call);
      return { kind: "message", message: await tenants.get(req) };
    }),
    operation(admin.updateTenant, async (call, req) => {
      may(req.name, call);
      return { kind: "message", message: await tenants.update(req) };
    }),
    operation(admin.setProviderKeys, async (call, req) => {
      may(req.tenant, call);
      return { kind: "message", message: await keys.set(req) };
    }),
    operation(admin.getProviderKeys, async (call, req) => {
      may(req.tenant, call);
      return { kind: "message", message: await keys.get(req) };
    }),
    operation(admin.revokeProviderKey, async (call, req) => {
      may(req.tenant, call);
      return { kind: "message", message: await keys.revoke(req) };
    }),
  ];
}
