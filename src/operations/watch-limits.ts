/**
 * How many watches may be open at once (issue 50, item 2): per caller, per tenant, per tenant over HTTP/1.1,
 * and in the whole process. A watch is counted in when it is admitted, before its change reader is joined, and
 * counted out once, however it ends (the events end or fail, the client leaves, the token expires, the server
 * closes). One caller's watchers then cannot starve the others of its tenant, and one tenant's cannot take the
 * process's whole allowance of streams (WATCH_MAX_OPEN, sized from a watcher's heap cost) nor the connections
 * its HTTP/1.1 streams hold (MAX_CONNECTIONS): beyond each, a watch is refused before it starts.
 */
import type { Principal } from "../auth/principal.js";
import { type RegistryError, tooManyWatches, watchesFull } from "../domain/errors.js";

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

/**
 * Call.watchKey of a REST watch: its request path as sent and its one Authorization header exactly. Two requests
 * of one key name one tenant and bring one token, so one caller.
 */
export function watchKeyOf(pathname: string, authorization: string): string {
  return `${pathname}\u0000${authorization}`;
}

/** What a watch is counted by. */
export interface Watcher {
  readonly tenant: string;
  readonly principal: Principal;
  /** The watch came on an HTTP/1.1 connection, which it holds for as long as it lasts. */
  readonly http1: boolean;
  /**
   * What the request looked like before it was authenticated (Call.watchKey: REST's watch over HTTP/1.1, its
   * path and exact Authorization header): the watches of one key are also counted by it, for `refuseEarly`.
   */
  readonly key?: string | undefined;
}

export interface WatchLimits {
  /**
   * Counts a watch in, or throws TOO_MANY_WATCHES (its caller's or its tenant's limit) or WATCHES_FULL (the
   * process's). Returns the function that counts it out; only its first call counts.
   */
  admit(watcher: Watcher): () => void;
  /**
   * The refusal `admit` gave a watch of `key` when that key's own watches alone hold its caller's limit, else
   * undefined: the same error object while they do, counted in `refusedEarly`. A watch of that key would be
   * refused by `admit` with it (same path and token: same tenant and caller, whose count is at least the key's),
   * so an adapter may answer it before authenticating it (src/node/early-watch-refusal.ts). Not once the token
   * has expired: its watches end, and a new request with it is answered UNAUTHENTICATED.
   */
  refuseEarly(key: string): RegistryError | undefined;
  /** The watches of `key` open now. */
  openOf(key: string): number;
  /** WATCH_MAX_PER_TOKEN. */
  readonly perToken: number;
  /** Watches open now. */
  readonly open: number;
  /** Watches refused by `refuseEarly` so far. */
  readonly refusedEarly: number;
}

/** The watches of one key (Watcher.key) open now, and the caller's refusal once `admit` gave one. */
interface KeyCount {
  open: number;
  refusal: RegistryError | undefined;
  readonly expiresAt: number;
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
  const keys = new Map<string, KeyCount>();
  let open = 0;
  let refusedEarly = 0;
  return {
    get open() {
      return open;
    },
    get refusedEarly() {
      return refusedEarly;
    },
    perToken,
    openOf: (key) => keys.get(key)?.open ?? 0,
    refuseEarly(key) {
      const count = keys.get(key);
      if (count?.refusal === undefined || count.open < perToken || Date.now() >= count.expiresAt) return undefined;
      refusedEarly++;
      return count.refusal;
    },
    admit({ tenant, principal, http1, key }) {
      const caller = callerOf(principal);
      const count = tenants.get(tenant);
      const ofCaller = count?.callers.get(caller) ?? 0;
      // The caller's own limits first: a caller at its own is told so, whatever the others do.
      if (ofCaller >= perToken) {
        const refusal = tooManyWatches(
          `The caller ("${principal.subject}") has as many watches open in tenant "${tenant}" as one caller may ` +
            `(WATCH_MAX_PER_TOKEN ${perToken}); close one, or watch again later.`,
        );
        // Kept for refuseEarly once the key's own watches hold the limit: then this is what admit answers it.
        const ofKey = key === undefined ? undefined : keys.get(key);
        if (ofKey !== undefined && ofKey.open >= perToken) ofKey.refusal ??= refusal;
        throw refusal;
      }
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
      const ofKey = key === undefined ? undefined : countKey(keys, key, principal);
      let counted = true;
      return () => {
        if (!counted) return;
        counted = false;
        if (ofKey !== undefined && --ofKey.open === 0) keys.delete(key as string);
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

/** Counts a watch of `key` in (its count made at its first). */
function countKey(keys: Map<string, KeyCount>, key: string, principal: Principal): KeyCount {
  let count = keys.get(key);
  if (count === undefined) {
    count = { open: 0, refusal: undefined, expiresAt: principal.expiresAt ?? Number.POSITIVE_INFINITY };
    keys.set(key, count);
  }
  count.open++;
  return count;
}
