/**
 * Long streams keep checking their caller's token (issue 50, item 4): a watch
 * is admitted once, and without this it would go on after its token was
 * revoked at the issuer, for ever when the introspection answer names no
 * expiry. Every stream that holds a token follows it here; the token is
 * checked again in full (Authenticator.recheck: a new introspection, or the
 * JWT against the keys held now) every interval, once for all the streams that
 * hold it, so a thousand watches of one token cost the issuer what one does.
 */
import { RegistryError, unauthenticated } from "../domain/errors.js";
import { type Authenticator, bearerToken } from "./authenticator.js";
import { type TokenKey, tokenKey } from "./token-cache.js";

export interface TokenRechecks {
  /**
   * Follows the token of `authorization` (a header already accepted) until the function returned is called:
   * `onRefused` is called once, with the UNAUTHENTICATED error a stream ends with, when a recheck refuses it.
   */
  follow(authorization: string, onRefused: (error: RegistryError) => void): () => void;
  /** How many tokens are followed (for tests). */
  readonly size: number;
}

export interface TokenRechecksOptions {
  readonly authenticator: Pick<Authenticator, "recheck">;
  /** How long after its first follower, and after each check, a token is checked again (WATCH_TOKEN_RECHECK_MS). */
  readonly intervalMs: number;
  /**
   * A recheck that could not be made (the issuer did not answer, 503): the streams go on and the token is checked
   * again an interval later. Told here for the log.
   */
  readonly onUnavailable?: (error: unknown) => void;
}

interface Followed {
  readonly authorization: string;
  readonly followers: Set<(error: RegistryError) => void>;
  timer: ReturnType<typeof setTimeout> | undefined;
}

export function createTokenRechecks({ authenticator, intervalMs, onUnavailable }: TokenRechecksOptions): TokenRechecks {
  const followed = new Map<TokenKey, Followed>();
  const arm = (key: TokenKey, entry: Followed): void => {
    entry.timer = setTimeout(() => {
      entry.timer = undefined;
      authenticator.recheck(entry.authorization).then(
        () => {
          // The next check an interval after this one ended: checks of one token never overlap.
          if (followed.get(key) === entry) arm(key, entry);
        },
        (error: unknown) => {
          if (followed.get(key) !== entry) return;
          if (!(error instanceof RegistryError && error.code === "UNAUTHENTICATED")) {
            // An issuer that cannot be asked says nothing about the token: ending every watch at each blip of
            // the issuer would turn it into a storm of reconnections, answered 503 meanwhile.
            onUnavailable?.(error);
            arm(key, entry);
            return;
          }
          followed.delete(key);
          const refused = unauthenticated(
            `The bearer token is no longer accepted (${error.message.replace(/\.$/, "")}); the watch ends. Resume ` +
              `with a new token from the last revision received.`,
          );
          for (const onRefused of entry.followers) onRefused(refused);
          entry.followers.clear();
        },
      );
    }, intervalMs);
  };
  return {
    follow(authorization, onRefused) {
      // By the token, not the header's spelling: `bearer x` and `Bearer  x` hold one token.
      const key = tokenKey(bearerToken(authorization));
      let entry = followed.get(key);
      if (entry === undefined) {
        entry = { authorization, followers: new Set(), timer: undefined };
        followed.set(key, entry);
        arm(key, entry);
      }
      const held = entry;
      // A function of its own per follower: one stream's end never removes another's.
      const follower = (error: RegistryError) => onRefused(error);
      held.followers.add(follower);
      return () => {
        held.followers.delete(follower);
        if (held.followers.size > 0 || followed.get(key) !== held) return;
        followed.delete(key);
        clearTimeout(held.timer);
      };
    },
    get size() {
      return followed.size;
    },
  };
}
