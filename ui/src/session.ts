/**
 * The signed-in session: the access token and what it says, in this module's memory only (never in storage,
 * never in a URL), so a reload or a new tab signs in again. When the token expires, or the API refuses it, the
 * session ends and the page says so (listeners of `onSessionChange`).
 */

export interface Session {
  readonly token: string;
  /** Milliseconds since the epoch. */
  readonly expiresAt: number;
  readonly subject: string;
  readonly tenant: string | undefined;
  readonly domains: readonly string[];
}

let session: Session | undefined;
let timer: ReturnType<typeof setTimeout> | undefined;
/** Why the last session ended, to show on the sign-in page. */
let endedBecause: string | undefined;
const listeners = new Set<() => void>();

export function onSessionChange(listener: () => void): void {
  listeners.add(listener);
}

function changed(): void {
  for (const listener of listeners) listener();
}

export function currentSession(): Session | undefined {
  return session;
}

export function currentToken(): string | undefined {
  return session?.token;
}

/** Why the previous session ended (expired, refused, signed out), once; undefined when it did not. */
export function takeEndReason(): string | undefined {
  const reason = endedBecause;
  endedBecause = undefined;
  return reason;
}

/**
 * Starts a session with an access token valid for `expiresIn` seconds (the token answer's `expires_in`). The end
 * is reckoned on this browser's clock from the moment the answer came, not from the token's `exp`, which is on
 * the issuer's clock: a browser whose clock runs ahead would otherwise take a fresh token for an expired one and
 * ask to sign in again at once, forever. The `exp` claim is used only when the answer gave no `expires_in`.
 */
export function startSession(token: string, expiresIn: number | undefined): void {
  const claims = claimsOf(token);
  const expiresAt =
    expiresIn !== undefined && Number.isFinite(expiresIn) && expiresIn > 0
      ? Date.now() + expiresIn * 1000
      : typeof claims.exp === "number"
        ? claims.exp * 1000
        : Date.now() + 300_000;
  const domains = claims.domains;
  session = {
    token,
    expiresAt,
    subject: typeof claims.sub === "string" ? claims.sub : "signed in",
    tenant: typeof claims.tenant === "string" ? claims.tenant : undefined,
    domains: Array.isArray(domains) ? domains.filter((d): d is string => typeof d === "string") : [],
  };
  endedBecause = undefined;
  endAt(token, expiresAt);
  changed();
}

/** Ends the session of `token` at `expiresAt` (setTimeout waits at most 2^31-1 ms, 24.8 days: longer, again). */
function endAt(token: string, expiresAt: number): void {
  clearTimeout(timer);
  timer = setTimeout(
    () => {
      if (session?.token !== token) return;
      if (Date.now() >= expiresAt) endSession("Your session has expired: sign in again.");
      else endAt(token, expiresAt);
    },
    Math.min(Math.max(0, expiresAt - Date.now()), 2 ** 31 - 1),
  );
}

export function endSession(reason: string): void {
  if (session === undefined) return;
  session = undefined;
  endedBecause = reason;
  clearTimeout(timer);
  changed();
}

/** The API refused the token (401): the session is over. */
export function sessionExpired(message: string): void {
  endSession(`The registry refused your sign-in (${message}): sign in again.`);
}

/**
 * The claims of a JWT access token, read for display only (who is signed in, which tenant): the registry checks
 * the token on every call, the page trusts nothing it reads here. An opaque token has none.
 */
function claimsOf(token: string): Record<string, unknown> {
  const payload = token.split(".")[1];
  if (payload === undefined) return {};
  try {
    const json = atob(payload.replace(/-/g, "+").replace(/_/g, "/"));
    const bytes = Uint8Array.from(json, (c) => c.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>;
  } catch {
    return {};
  }
}
