/**
 * The registry's operations, one per RPC of the contract: policy (the domains
 * of docs/contract.md, "Security"), tenant resolution, then the service. Every surface reaches
 * these and nothing else: the Connect routes (gRPC, gRPC-Web, Connect) and the
 * REST routes look them up by method.
 */
import type { DescMessage, DescMethod, DescService } from "@bufbuild/protobuf";
import {
  AgentDefinitionService,
  ProbeAgentDefinitionRequestSchema,
  type WatchAgentDefinitionsRequest,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { TenantAdminService } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { bodyFieldOf, errorRelativeToBody } from "../domain/body-field.js";
import { RegistryError, unauthenticated, unavailable } from "../domain/errors.js";
import type { StoredDefinition } from "../domain/records.js";
import { assertValid, contractIssues, unknownFieldIssues } from "../domain/validation.js";
import type { WatchEvent } from "../domain/watch.js";
import type { ProviderKeyService } from "../service/provider-key-service.js";
import type { RegistryService, WriteAuthority } from "../service/registry-service.js";
import type { TenantService } from "../service/tenant-service.js";
import type { WatchService } from "../service/watch-service.js";
import { type Call, type Operation, type Operations, type Result, resolveTenant } from "./operation.js";
import { type Define, PLATFORM_METHODS, tenantAdminOperations } from "./tenant-admin-operations.js";
import type { WatchLimits } from "./watch-limits.js";

/** Probes the agent of version `id` of `tenant` now; answers the version with its liveness after it. */
export type ProbeNow = (tenant: string, id: string) => Promise<StoredDefinition>;

/** The security domains of the contract (docs/contract.md, "Security"). */
export const DEVELOPMENT = "Development";
export const SETUP_AGENTS = "Setup: Agents";

/** The services whose RPCs are operations (authenticated, on every surface). */
export const REGISTRY_SERVICES: readonly DescService[] = [AgentDefinitionService, TenantAdminService];

export interface RegistryOperationsOptions {
  readonly service: RegistryService;
  readonly tenants: TenantService;
  /** Provider keys (issue 43). */
  readonly providerKeys: ProviderKeyService;
  /** The watch; without it WatchAgentDefinitions answers UNAVAILABLE. */
  readonly watch?: WatchService;
  /** How many watches may be open (WATCH_MAX_*); without it, any number. */
  readonly watchLimits?: WatchLimits;
  /** Probes a version's agent now (issue 44); without it ProbeAgentDefinition answers UNAVAILABLE. */
  readonly probe?: ProbeNow;
  /** The tenant of requests that name none (the contract's `/asor/v1` paths). */
  readonly defaultTenant: string;
  /** The security domain of the tenant admin RPCs. */
  readonly adminDomain: string;
  /**
   * The claims that scope a caller (AuthConfig): its tenant, the platform admin flag, and what a token
   * without a tenant claim may do.
   */
  readonly claims: {
    readonly tenantClaim: string;
    readonly platformAdminClaim: string;
    readonly noTenantClaimUsesDefault: boolean;
  };
  /** A tenant's `discovery` setting (issue 45): whether its discovery reads answer without a token. */
  readonly discovery?: (tenant: string) => Promise<"TOKEN" | "PUBLIC">;
}

const methods = AgentDefinitionService.method;

/**
 * What a caller's writes may do beyond the operation's domain: change a
 * deactivated agent's versions only with the domain that deactivates
 * (Setup: Agents, PATCH .../status), so Development cannot undo it.
 */
export const authorityOf = (call: Call): WriteAuthority => ({
  mayReactivate: call.principal.domains.has(SETUP_AGENTS),
});

/** Which domains admit a caller to each RPC (any one of them suffices), by `package.Service/Method`. */
export type Policy = ReadonlyMap<string, readonly string[]>;

/**
 * The contract's reading of its security domains (docs/contract.md, "Security"): list, upsert and update by id (PUT,
 * the same work as a POST) need Development or Setup: Agents; get, the
 * versions list, the agent card, setting a status and probing need Setup: Agents. The tenant
 * admin RPCs need the admin domain (and setting up or listing tenants a platform operator's token besides;
 * a tenant's settings and keys, that tenant's or a platform operator's: tenant-admin-operations.ts). The
 * OpenAPI document is generated from the same table. A write to a deactivated agent needs Setup: Agents besides
 * (authorityOf, decided in the write's transaction).
 */
export function registryPolicy(adminDomain: string): Policy {
  return new Map([
    ["asor.v1.AgentDefinitionService/ListAgentDefinitions", [DEVELOPMENT, SETUP_AGENTS]],
    // The watch reads what the list reads: the same domains (issue 20, item 5).
    ["asor.v1.AgentDefinitionService/WatchAgentDefinitions", [DEVELOPMENT, SETUP_AGENTS]],
    ["asor.v1.AgentDefinitionService/UpsertAgentDefinition", [DEVELOPMENT, SETUP_AGENTS]],
    ["asor.v1.AgentDefinitionService/UpdateAgentDefinition", [DEVELOPMENT, SETUP_AGENTS]],
    ["asor.v1.AgentDefinitionService/SetAgentDefinitionStatus", [SETUP_AGENTS]],
    ["asor.v1.AgentDefinitionService/GetAgentDefinition", [SETUP_AGENTS]],
    ["asor.v1.AgentDefinitionService/ListAgentDefinitionVersions", [SETUP_AGENTS]],
    ["asor.v1.AgentDefinitionService/GetAgentCard", [SETUP_AGENTS]],
    ["asor.v1.AgentDefinitionService/GetAgentBaseCard", [SETUP_AGENTS]],
    ["asor.v1.AgentDefinitionService/GetAiCatalog", [DEVELOPMENT, SETUP_AGENTS]],
    // Probing makes the registry connect to the agent: the domain that manages agents (issue 44, item 6).
    ["asor.v1.AgentDefinitionService/ProbeAgentDefinition", [SETUP_AGENTS]],
    ["asor.v1.TenantAdminService/CreateTenant", [adminDomain]],
    ["asor.v1.TenantAdminService/ListTenants", [adminDomain]],
    ["asor.v1.TenantAdminService/GetTenant", [adminDomain]],
    ["asor.v1.TenantAdminService/UpdateTenant", [adminDomain]],
    ["asor.v1.TenantAdminService/SetProviderKeys", [adminDomain]],
    ["asor.v1.TenantAdminService/GetProviderKeys", [adminDomain]],
    ["asor.v1.TenantAdminService/RevokeProviderKey", [adminDomain]],
  ]);
}

/** The registry's operations by method; each admits the callers its policy names. */
export function createRegistryOperations({
  service,
  tenants,
  providerKeys,
  watch,
  watchLimits,
  probe,
  defaultTenant,
  adminDomain,
  claims,
  discovery,
}: RegistryOperationsOptions): Operations {
  const policy = registryPolicy(adminDomain);
  // The tenant admin RPCs act on every tenant: platform operations (see admit).
  const platform = { adminClaim: claims.platformAdminClaim };
  const operation: Define = (method, run) => defineOperation(policy, platform, method, run);
  const tenancy = {
    defaultTenant,
    tenantClaim: claims.tenantClaim,
    noTenantClaimUsesDefault: claims.noTenantClaimUsesDefault,
  };
  const tenantOf = (requested: string, call: Call): string => resolveTenant(requested, call, tenancy);
  const discoveryTenantOf = publicDiscovery(tenantOf, defaultTenant, discovery);
  const list: Operation[] = [
    ...definitionOperations(operation, service, tenantOf, watch, watchLimits),
    operation(methods.probeAgentDefinition, async (call, req) => {
      assertValid([
        ...unknownFieldIssues(ProbeAgentDefinitionRequestSchema, req),
        ...contractIssues(ProbeAgentDefinitionRequestSchema, req),
      ]);
      if (probe === undefined) throw unavailable(undefined, "This server does not probe agents (PROBE_ENABLED=false).");
      return { kind: "definition", stored: await probe(tenantOf(req.tenant, call), req.id), created: false };
    }),
    ...discoveryOperations(operation, service, discoveryTenantOf),
    ...tenantAdminOperations(operation, tenants, providerKeys, tenancy),
  ];
  const byMethod = new Map<DescMethod, Operation>(list.map((op) => [op.method, op]));
  for (const s of REGISTRY_SERVICES) {
    for (const m of s.methods)
      if (!byMethod.has(m))
        throw new Error(`${s.typeName}/${m.name} has no operation: every RPC of the registry needs one.`);
  }
  return byMethod;
}

/** The tenant of a request (`requested`: the tenant it names, if any) for `call` (resolveTenant). */
type TenantOf = (requested: string, call: Call) => string;

/**
 * The tenant of a discovery read: a caller with a token as any read's (TenantOf); one without (ANONYMOUS) the
 * tenant it names, else the default, and only when that tenant's discovery is PUBLIC, else 401 as any read
 * without a token (an unknown tenant too: a caller without a token learns nothing of which tenants exist).
 */
function publicDiscovery(
  tenantOf: TenantOf,
  defaultTenant: string,
  discovery: RegistryOperationsOptions["discovery"],
): (requested: string, call: Call) => Promise<string> {
  return async (requested, call) => {
    if (call.principal.anonymous !== true) return tenantOf(requested, call);
    const tenant = requested || defaultTenant;
    const access = await discovery?.(tenant).catch((error: unknown) => {
      if (error instanceof RegistryError && error.code === "TENANT_NOT_FOUND") return "TOKEN" as const;
      throw error;
    });
    if (access !== "PUBLIC")
      throw unauthenticated(
        `Tenant "${tenant}"'s discovery is not public: send a bearer token (Authorization: Bearer <token>).`,
      );
    if (call.record !== undefined) call.record.tenant = tenant;
    return tenant;
  };
}

/** The discovery reads (issue 45), which a public tenant answers without a token. */
function discoveryOperations(
  operation: Define,
  service: RegistryService,
  tenantOf: (requested: string, call: Call) => Promise<string>,
): Operation[] {
  return [
    operation(methods.getAgentBaseCard, async (call, req) => ({
      kind: "card",
      ...(await service.baseCard(await tenantOf(req.tenant, call), req)),
    })),
    operation(methods.getAiCatalog, async (call, req) => ({
      kind: "message",
      message: await service.aiCatalog(await tenantOf(req.tenant, call), req, call.publicBase ?? "", call),
    })),
  ].map((op) => ({ ...op, discovery: true }));
}

function defineOperation<In extends DescMessage>(
  policy: Policy,
  platform: { readonly adminClaim: string },
  method: DescMethod & { readonly input: In },
  run: Operation<In>["run"],
): Operation {
  const domains = policy.get(`${method.parent.typeName}/${method.name}`);
  if (domains === undefined) throw new Error(`${method.parent.typeName}/${method.name} has no policy.`);
  // The service's issues name whole requests' paths; every surface gives them relative to the body, as the
  // client sent it.
  // A method without a body field (the reads) runs as it is: no promise more on the hot path.
  const bodyField = bodyFieldOf(method);
  const relative: Operation<In>["run"] =
    bodyField === undefined
      ? run
      : (call, input) =>
          run(call, input).catch((error: unknown) => {
            throw errorRelativeToBody(error, bodyField);
          });
  return {
    method,
    domains,
    run: relative,
    ...(PLATFORM_METHODS.has(method) ? { platform } : {}),
  } as Operation<In> as unknown as Operation;
}

/** The operations of AgentDefinitionService, in the order of its RPCs' reads, then writes. */
function definitionOperations(
  operation: Define,
  service: RegistryService,
  tenantOf: TenantOf,
  watch: WatchService | undefined,
  watchLimits: WatchLimits | undefined,
): Operation[] {
  return [
    operation(methods.listAgentDefinitions, async (call, req) => ({
      kind: "page",
      page: await service.list(tenantOf(req.tenant, call), req, call),
    })),
    operation(methods.watchAgentDefinitions, (call, req) => runWatch(watch, watchLimits, tenantOf, call, req)),
    operation(methods.getAgentDefinition, async (call, req) => ({
      kind: "definition",
      ...(await service.get(tenantOf(req.tenant, call), req)),
      created: false,
    })),
    operation(methods.listAgentDefinitionVersions, async (call, req) => ({
      kind: "page",
      page: await service.listVersions(tenantOf(req.tenant, call), req, call),
    })),
    operation(methods.getAgentCard, async (call, req) => ({
      kind: "card",
      ...(await service.agentCard(tenantOf(req.tenant, call), req)),
    })),
    operation(methods.upsertAgentDefinition, async (call, req) => {
      const { stored, created } = await service.upsert(tenantOf(req.tenant, call), req, authorityOf(call));
      return { kind: "definition", stored, created };
    }),
    operation(methods.updateAgentDefinition, async (call, req) => ({
      kind: "definition",
      stored: await service.update(tenantOf(req.tenant, call), req, authorityOf(call)),
      created: false,
    })),
    operation(methods.setAgentDefinitionStatus, async (call, req) => {
      const { total, data, one } = await service.setStatus(tenantOf(req.tenant, call), req);
      return { kind: "page", page: { total, data }, one };
    }),
  ];
}

/** WatchAgentDefinitions: the tenant's events while the caller stays, its token holds and its place is kept. */
async function runWatch(
  watch: WatchService | undefined,
  watchLimits: WatchLimits | undefined,
  tenantOf: TenantOf,
  call: Call,
  req: WatchAgentDefinitionsRequest,
): Promise<Result> {
  if (watch === undefined) throw unavailable(undefined, "This server does not serve watches.");
  // Ends the watcher when the client leaves, and when its token expires or a recheck refuses it
  // (whileTokenHolds).
  const stop = new AbortController();
  const { signal } = call;
  if (signal?.aborted === true) stop.abort();
  else signal?.addEventListener("abort", () => stop.abort(), { once: true });
  const tenant = tenantOf(req.tenant, call);
  // Counted from before its first read until it ends, whichever way: its events end or fail, or its signal
  // aborts (the client left, the token expired or was refused), which also covers a stream whose events were
  // never read.
  const release = watchLimits?.admit({
    tenant,
    principal: call.principal,
    http1: call.http1 === true,
    key: call.watchKey,
  });
  if (release === undefined) {
    const events = await watch.watch(tenant, req, stop.signal);
    return { kind: "events", events: whileTokenHolds(events, call, stop) };
  }
  stop.signal.addEventListener("abort", release, { once: true });
  try {
    const events = await watch.watch(tenant, req, stop.signal);
    return { kind: "events", events: releasing(whileTokenHolds(events, call, stop), release) };
  } catch (err) {
    release();
    throw err;
  }
}

/**
 * `events` while the caller's token holds: until its `exp` (the principal's `expiresAt`, issue 20, item 5), and
 * until a recheck refuses it (`call.followToken`, every WATCH_TOKEN_RECHECK_MS: revoked at the issuer, issue 50,
 * item 4). Then they end with UNAUTHENTICATED, as a new request with that token would be answered.
 */
export function whileTokenHolds(
  events: AsyncIterable<readonly WatchEvent[]>,
  call: Pick<Call, "principal" | "followToken">,
  stop: AbortController,
): AsyncIterable<readonly WatchEvent[]> {
  const { expiresAt } = call.principal;
  const { followToken } = call;
  if (expiresAt === undefined && followToken === undefined) return events;
  return (async function* holding(): AsyncGenerator<readonly WatchEvent[]> {
    // A flag and the watch's own abort, not a race of each read against one ending promise: every
    // Promise.race would add a reaction to that promise, kept (with the read's result) until the token
    // ends, a leak of every event every watcher received.
    let ended: RegistryError | undefined;
    const end = (error: RegistryError) => {
      ended ??= error;
      // Ends the watcher, so its pending read settles.
      stop.abort();
    };
    let timer: ReturnType<typeof setTimeout> | undefined;
    const arm = () => {
      if (expiresAt === undefined) return;
      const left = expiresAt - Date.now();
      if (left > 0) {
        // setTimeout takes at most 2^31 - 1 ms (24.8 days); a longer token re-arms.
        timer = setTimeout(arm, Math.min(left, 2 ** 31 - 1));
        return;
      }
      end(
        unauthenticated(
          "The bearer token expired; the watch ends. Resume with a new token from the last revision received.",
        ),
      );
    };
    arm();
    const unfollow = followToken?.(end);
    try {
      for await (const batch of events) {
        if (ended !== undefined) break;
        yield batch;
      }
      if (ended !== undefined) throw ended;
    } finally {
      clearTimeout(timer);
      unfollow?.();
    }
  })();
}

/** `events`, then `release` once they end, fail or are left: the watch's place (WatchLimits) is given back. */
async function* releasing(
  events: AsyncIterable<readonly WatchEvent[]>,
  release: () => void,
): AsyncGenerator<readonly WatchEvent[]> {
  try {
    yield* events;
  } finally {
    release();
  }
}
