/**
 * A bounded, short-lived memory of tokens already checked in full, so a
 * caller's next request does not pay for a signature check (or an
 * introspection round trip) again. Keys are SHA-256 hashes of the whole token:
 * the token itself is never kept, and a token that differs in any byte (its
 * signature, its payload, its audience) is another key and is checked afresh.
 * Only the caller decides what goes in, and it puts in only what passed every
 * check; this module never turns a failure into an entry.
 */
import { hash } from "node:crypto";

/** The longest any entry lives, in milliseconds, whatever its token's lifetime: 60 s. */
export const TOKEN_CACHE_MAX_AGE_MS = 60_000;
/** The most entries kept by default: 10,000 (a few MiB at most); beyond it the least recently used goes. */
export const TOKEN_CACHE_MAX_ENTRIES = 10_000;

/** The SHA-256 of a token (base64url). A distinct type so a raw token cannot be used as a key by mistake. */
export type TokenKey = string & { readonly __tokenKey: unique symbol };

/**
 * The key of a token: SHA-256 over all of it, header, payload and signature.
 * node:crypto's one-shot `hash` (also on Deno, the same digest) hashes
 * synchronously, without the Hash object createHash makes: a request's token is
 * hashed at every request.
 */
export function tokenKey(token: string): TokenKey {
  return hash("sha256", token, "base64url") as TokenKey;
}

export interface TokenCacheOptions {
  /** The clock, in milliseconds since the epoch; the one the verification used. */
  readonly now: () => number;
  /** The most entries kept; default TOKEN_CACHE_MAX_ENTRIES. */
  readonly maxEntries?: number;
  /** The longest any entry lives, in ms; default (and at most) TOKEN_CACHE_MAX_AGE_MS. */
  readonly maxAgeMs?: number;
}

export interface TokenCache<T> {
  /** The value kept for a token, or undefined when there is none or it has expired (an expired entry is dropped). */
  get(key: TokenKey): T | undefined;
  /**
   * Keeps `value` until the earliest of now + the cache's max age, now +
   * `ttlMs` and `notAfterMs` (the token's `exp`, in ms). Nothing is kept when
   * that moment is not in the future, e.g. for a token accepted only thanks to
   * the clock skew tolerance.
   */
  set(key: TokenKey, value: T, limits?: EntryLimits): void;
  /** Forgets a token: one refused on a recheck (a revoked one) is not answered from here again. */
  delete(key: TokenKey): void;
  /** How many entries are held (expired ones included until they are looked up or evicted). */
  readonly size: number;
}

/** What shortens an entry's life below the cache's max age. */
export interface EntryLimits {
  /** At most this long from now, in ms. */
  readonly ttlMs?: number;
  /** Never at or past this moment, in ms since the epoch: the token's `exp` × 1000. */
  readonly notAfterMs?: number;
}

interface Entry<T> {
  readonly value: T;
  /** In ms since the epoch; the entry is used only while now < deadline. */
  readonly deadline: number;
}

/**
 * A least-recently-used cache over a Map (whose iteration order is insertion
 * order: a hit re-inserts its entry at the end, so the first key is always the
 * least recently used). LRU rather than oldest-first so the tokens in steady
 * use stay while a burst of one-off tokens pushes out only its own kind.
 */
export function createTokenCache<T>(options: TokenCacheOptions): TokenCache<T> {
  const maxEntries = options.maxEntries ?? TOKEN_CACHE_MAX_ENTRIES;
  const maxAgeMs = Math.min(options.maxAgeMs ?? TOKEN_CACHE_MAX_AGE_MS, TOKEN_CACHE_MAX_AGE_MS);
  if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new RangeError("A token cache holds at least one entry.");
  const { now } = options;
  const entries = new Map<TokenKey, Entry<T>>();
  return {
    get(key) {
      const entry = entries.get(key);
      if (entry === undefined) return undefined;
      entries.delete(key);
      // Checked against the clock at every lookup: no tolerance past the deadline (and so past `exp`).
      if (now() >= entry.deadline) return undefined;
      entries.set(key, entry);
      return entry.value;
    },
    set(key, value, limits = {}) {
      const t = now();
      const deadline = Math.min(
        t + maxAgeMs,
        t + (limits.ttlMs ?? maxAgeMs),
        limits.notAfterMs ?? Number.POSITIVE_INFINITY,
      );
      if (!(deadline > t)) return;
      entries.delete(key);
      entries.set(key, { value, deadline });
      while (entries.size > maxEntries) {
        const oldest = entries.keys().next();
        if (oldest.done === true) break;
        entries.delete(oldest.value);
      }
    },
    delete(key) {
      entries.delete(key);
    },
    get size() {
      return entries.size;
    },
  };
}
