/**
 * How many watches may be open at once (issue 50, item 2): per caller, per tenant, per tenant over HTTP/1.1,
 * and in the whole process. A watch is counted in when it is admitted, before its change reader is joined, and
 * counted out once, however it ends (the events end or fail, the client leaves, the token expires, the server
 * closes). One caller's watchers then cannot starve the others of its tenant, and one tenant's cannot take the
 * process's whole allowance of streams (WATCH_MAX_OPEN, sized from a watcher's heap cost) nor the connections
 * its HTTP/1.1 streams hold (MAX_CONNECTIONS): beyond each, a watch is refused before it starts.
 */
import type { Principal } from "../auth/principal.js";
import { tooManyWatches, watchesFull } from "../domain/errors.js";

/** The limits (Config.watch's WATCH_MAX_*). */
export interface WatchLimitSettings {
  /** WATCH_MAX_PER_TOKEN: one caller's watches (callerOf) in one tenant. */
  readonly perToken: number;
  /** WATCH_MAX_PER_TENANT: one tenant's watches, below `total`. */
  readonly perTenant: number;
  /** WATCH_MAX_HTTP1_PER_TENANT: one tenant's watches over HTTP/1.1, each holding a connection. */
  readonly http1PerTenant: number;
  /** WATCH_MAX_OPEN: the process's watches. */
  readonly total: number;
}

/** What a watch is counted by. */
export interface Watcher {
  readonly tenant: string;
  readonly principal: Principal;
  /** The watch came on an HTTP/1.1 connection, which it holds for as long as it lasts. */
  readonly http1: boolean;
}

export interface WatchLimits {
  /**
   * Counts a watch in, or throws TOO_MANY_WATCHES (its caller's or its tenant's limit) or WATCHES_FULL (the
   * process's). Returns the function that counts it out; only its first call counts.
   */
  admit(watcher: Watcher): () => void;
  /** Watches open now. */
  readonly open: number;
}

/**
 * Who a watch's caller is, for WATCH_MAX_PER_TOKEN: the token's subject (`sub`, else `client_id`) and its client
 * (`client_id`, else `azp`), not the token's bytes: a client can ask its issuer for another token at any time, but
 * not for another identity. Every token of one subject and client shares the allowance.
 */
export function callerOf(principal: Principal): string {
  return `${principal.subject}\u0000${principal.client ?? ""}`;
}

interface TenantCount {
  open: number;
  http1: number;
  readonly callers: Map<string, number>;
}

export function createWatchLimits(settings: WatchLimitSettings): WatchLimits {
  const { perToken, perTenant, http1PerTenant, total } = settings;
  const tenants = new Map<string, TenantCount>();
  let open = 0;
  return {
    get open() {
      return open;
    },
    admit({ tenant, principal, http1 }) {
      const caller = callerOf(principal);
      const count = tenants.get(tenant);
      const ofCaller = count?.callers.get(caller) ?? 0;
      // The caller's own limits first: a caller at its own is told so, whatever the others do.
      if (ofCaller >= perToken)
        throw tooManyWatches(
          `The caller ("${principal.subject}") has as many watches open in tenant "${tenant}" as one caller may ` +
            `(WATCH_MAX_PER_TOKEN ${perToken}); close one, or watch again later.`,
        );
      if ((count?.open ?? 0) >= perTenant)
        throw tooManyWatches(
          `Tenant "${tenant}" has as many watches open as one tenant may (WATCH_MAX_PER_TENANT ${perTenant}); ` +
            `close one, or watch again later.`,
        );
      if (http1 && (count?.http1 ?? 0) >= http1PerTenant)
        throw tooManyWatches(
          `Tenant "${tenant}" has as many watches open over HTTP/1.1, each holding a connection, as one tenant ` +
            `may (WATCH_MAX_HTTP1_PER_TENANT ${http1PerTenant}); watch over HTTP/2 (gRPC, or Connect over ` +
            `HTTP/2), whose streams share connections, or close one.`,
        );
      if (open >= total) throw watchesFull(total);
      const held = count ?? { open: 0, http1: 0, callers: new Map<string, number>() };
      if (count === undefined) tenants.set(tenant, held);
      held.open++;
      if (http1) held.http1++;
      held.callers.set(caller, ofCaller + 1);
      open++;
      let counted = true;
      return () => {
        if (!counted) return;
        counted = false;
        open--;
        held.open--;
        if (http1) held.http1--;
        const left = (held.callers.get(caller) ?? 1) - 1;
        if (left > 0) held.callers.set(caller, left);
        else held.callers.delete(caller);
        if (held.open === 0) tenants.delete(tenant);
      };
    },
  };
}
