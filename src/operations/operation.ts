/**
 * An operation: what one RPC does, the same for every surface. The edge of
 * each runtime authenticates the caller once and admits it (policy), then
 * runs the operation with that caller; REST and the Connect routes call the
 * very same object (see registry-operations.ts), so every surface runs the
 * same checks by construction.
 */
import type { DescMessage, DescMethod, Message, MessageShape } from "@bufbuild/protobuf";
import type { AgentCard } from "../../gen/asor/v1/agent_card_pb.js";
import type { Principal } from "../auth/principal.js";
import { forbidden, type RegistryError } from "../domain/errors.js";
import type { StoredDefinition } from "../domain/records.js";
import type { WatchEvent } from "../domain/watch.js";
import type { RequestRecord } from "../observability/request-record.js";
import type { DefinitionPage } from "../service/registry-service.js";

/** Who calls, as the edge established it, the request's record (for the access log), and its signal. */
export interface Call {
  readonly principal: Principal;
  readonly record?: RequestRecord | undefined;
  /**
   * Aborts when nobody waits for the answer any more: the client closed its
   * connection or reset its stream, cancelled its call, or its deadline
   * passed. Searches stop on it (storage/repository.ts Work).
   */
  readonly signal?: AbortSignal | undefined;
  /**
   * Follows the caller's token while a stream lasts (auth/token-rechecks.ts): `onRefused` is called once, with
   * the UNAUTHENTICATED error to end with, when a recheck refuses the token (revoked, expired, its key
   * withdrawn); the function returned stops following. Undefined: nothing rechecks this call's token.
   */
  readonly followToken?: ((onRefused: (error: RegistryError) => void) => () => void) | undefined;
  /**
   * The call came on an HTTP/1.x connection, which a stream's answer holds for as long as it lasts (a watch
   * over SSE, gRPC-Web or Connect): counted in its tenant's WATCH_MAX_HTTP1_PER_TENANT.
   */
  readonly http1?: boolean | undefined;
  /**
   * The registry's base URL as this call reached it, for the absolute URLs an answer holds (an AI Catalog's):
   * `PUBLIC_URL`, else `http://` and the authority the request was sent to.
   */
  readonly publicBase?: string | undefined;
  /**
   * A REST watch over HTTP/1.1: its request path and exact Authorization header (restWatchKey), by which its
   * watch is also counted, so that the adapter may refuse the next one of that key before authenticating it
   * (operations/watch-limits.ts refuseEarly).
   */
  readonly watchKey?: string | undefined;
}

/**
 * What an operation answers, before any encoding: a stored definition (its
 * bytes are answered as they are), a page of them (`one`: a status change
 * that named one version, which REST answers alone), a plain message, or an A2A
 * agent card with its ETag, or (a server-streaming RPC) the events to stream.
 */
export type Result =
  | {
      readonly kind: "definition";
      readonly stored: StoredDefinition;
      readonly created: boolean;
      /** The tenant revision a read was made at (gets; writes have none): the `X-Registry-Revision` header. */
      readonly revision?: number;
    }
  | { readonly kind: "page"; readonly page: DefinitionPage; readonly one?: boolean }
  | { readonly kind: "message"; readonly message: Message }
  | { readonly kind: "card"; readonly card: AgentCard; readonly etag: string }
  /** A server stream's events (the watch): each surface sends them as they come, then ends. */
  | { readonly kind: "events"; readonly events: AsyncIterable<readonly WatchEvent[]> };

export interface Operation<In extends DescMessage = DescMessage> {
  /** The RPC this operation serves; REST reaches it through the RPC's `google.api.http` rule. */
  readonly method: DescMethod & { readonly input: In };
  /** The security domains that admit a caller (any one of them); empty: no caller is admitted. */
  readonly domains: readonly string[];
  /**
   * Set for the platform operations (tenant admin), which act on every tenant:
   * only a platform operator is admitted, a token whose platform admin claim
   * (AUTH_PLATFORM_ADMIN_CLAIM, named here for the 403's message) is `true`.
   * A token without a tenant claim is not one by that alone.
   */
  readonly platform?: { readonly adminClaim: string } | undefined;
  /**
   * A discovery read (an agent's card at its A2A base URL, the AI Catalog): a caller without any token is
   * admitted as ANONYMOUS, and the operation serves it only a tenant whose `discovery` setting is PUBLIC.
   */
  readonly discovery?: boolean | undefined;
  /** Tenant resolution, validation, the service call. Throws RegistryError. */
  run(call: Call, input: MessageShape<In>): Promise<Result>;
}

/**
 * Runs `operation` for `call`, as every surface does: the request's record
 * holds the work until it settles, so the access line of a request whose
 * client left counts the work that went on after (RequestRecord.work).
 */
export function runOperation<In extends DescMessage>(
  operation: Operation<In>,
  call: Call,
  input: MessageShape<In>,
): Promise<Result> {
  const work = operation.run(call, input);
  const { record } = call;
  if (record !== undefined) {
    record.work = work;
    const settled = () => {
      if (record.work === work) record.work = undefined;
    };
    work.then(settled, settled);
  }
  return work;
}

/** The operations by their method, for the edges and the Connect routes to look up. */
export type Operations = ReadonlyMap<DescMethod, Operation>;

/**
 * The policy check, run by the edge before any body is read: the caller must
 * hold one of the operation's domains.
 */
export function admit(operation: Operation, principal: Principal): void {
  if (!operation.domains.some((domain) => principal.domains.has(domain))) {
    const allowed = operation.domains;
    const needs =
      allowed.length === 0
        ? "is not open to any caller"
        : `needs the security domain ${allowed.map((d) => `"${d}"`).join(" or ")}`;
    throw forbidden(`${operation.method.name} ${needs}.`);
  }
  const { platform } = operation;
  // A tenant's own administrator holds the admin domain too, but must not see or make other tenants;
  // neither may a token that only lacks a tenant claim (any client of the issuer may have one).
  if (platform !== undefined && !principal.platformAdmin) {
    const whose = principal.tenant === null ? "not one without it" : `not one for tenant "${principal.tenant}"`;
    throw forbidden(
      `${operation.method.name} acts on every tenant: it needs a platform operator's token ` +
        `("${platform.adminClaim}": true), ${whose}.`,
    );
  }
}

/** How a request's tenant follows from its caller's token. */
export interface Tenancy {
  /** The tenant of requests that name none and of tokens without a tenant claim (where allowed). */
  readonly defaultTenant: string;
  /** The claim naming the caller's tenant (for messages). */
  readonly tenantClaim: string;
  /** Whether a token without the tenant claim acts on the default tenant; else it acts on none. */
  readonly noTenantClaimUsesDefault: boolean;
}

/**
 * The tenant a request acts on, and the check that its caller may: a request
 * names its tenant, else the token's tenant is meant. A token with a tenant
 * claim acts on that tenant only; a token without one acts on the default
 * tenant only, and only where the operator allows that (otherwise 403 naming
 * the missing claim).
 */
export function resolveTenant(requested: string, call: Call, tenancy: Tenancy): string {
  if (call.principal.tenant === null && !tenancy.noTenantClaimUsesDefault) {
    throw forbidden(
      `The caller's token has no "${tenancy.tenantClaim}" claim, so it acts on no tenant ` +
        `(AUTH_NO_TENANT_CLAIM_USES_DEFAULT is off); ask the issuer for a token with a "${tenancy.tenantClaim}" ` +
        `claim.`,
    );
  }
  const own = call.principal.tenant ?? tenancy.defaultTenant;
  const tenant = requested || own;
  if (tenant !== own) throw forbidden(`The caller's token is for tenant "${own}", not "${tenant}".`);
  // The access log names the tenant a request acted on.
  if (call.record !== undefined) call.record.tenant = tenant;
  return tenant;
}

/**
 * What the edge knows of a caller before the operation runs: admitted, or the error to answer with (for RPCs,
 * also a refused message).
 */
export type Admission =
  | { readonly call: Call; readonly error?: undefined }
  | { readonly call?: undefined; readonly error: RegistryError };
