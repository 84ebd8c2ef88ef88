/**
 * The authenticator: reads the Authorization header, verifies the bearer
 * token (a JWT against the issuer's keys, or an opaque token by introspection)
 * and maps its claims to a Principal. Two modes: an OAuth2 resource server for
 * a configured issuer, or the local development issuer. Both remember the
 * tokens they accepted for a short while (token-cache.ts), so a busy caller
 * pays for one signature check or introspection a minute, not one a request;
 * and a token's check under way is shared by the requests that bring it
 * meanwhile, so a burst of one caller's connections pays for one.
 */
import { createLocalJWKSet } from "jose";
import * as oidc from "openid-client";
import { RegistryError } from "../domain/errors.js";
import type { AuthConfig } from "./auth-config.js";
import { AuthSetupError, scrub, unauthenticated } from "./auth-errors.js";
import { createIntrospector, type Introspector } from "./introspection.js";
import { createJwtVerifier, type JwtVerifier, looksLikeJwt, remoteKeys } from "./jwt-verifier.js";
import { type KeyStore, type LocalIssuer, openLocalIssuer } from "./local-issuer.js";
import { type ClaimMapping, type Principal, principalFromClaims } from "./principal.js";
import { createTokenCache, type TokenKey, tokenKey } from "./token-cache.js";

export type { Principal } from "./principal.js";

export interface Authenticator {
  /** The mode, for the start-up line. Never a secret. */
  readonly description: string;
  /**
   * Verifies the Authorization header value (may be null). Throws RegistryError
   * code UNAUTHENTICATED (401) saying what is wrong without echoing the token,
   * or UNAVAILABLE (503) when the issuer cannot be asked.
   */
  authenticate(authorization: string | null): Promise<Principal>;
  /**
   * Checks the token again in full, never from the token cache: its signature and claims against the keys held
   * now, or a new introspection. What a long stream asks at an interval (token-rechecks.ts). A token it refuses
   * is dropped from the cache, so no request is let in by what the cache remembered of it; one it accepts is
   * cached afresh. Throws as `authenticate` does.
   */
  recheck(authorization: string | null): Promise<Principal>;
  /** The local development issuer, when it is the one (no AUTH_ISSUER): the catalog's sign-in asks it for tokens. */
  readonly localIssuer?: LocalIssuer;
}

export interface AuthenticatorDeps {
  /** Where the local development issuer keeps its key; required when no issuer is configured. */
  readonly keyStore?: KeyStore;
  /** The fetch for discovery, JWKS and introspection; default the global one. */
  readonly fetch?: typeof fetch;
  /**
   * The clock, in milliseconds since the epoch, for `exp`/`nbf` and the token
   * cache alike; default Date.now. For tests.
   */
  readonly now?: () => number;
}

/** RFC 6750 §2.1: `Bearer` (any case), spaces, a b64token. */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
/** Longer tokens are refused before any parsing (real access tokens are a few KiB at most). */
const MAX_TOKEN_LENGTH = 16 * 1024;

/** The token of an Authorization header value; throws 401 when there is none or the header has another form. */
export function bearerToken(authorization: string | null): string {
  if (authorization === null || authorization.trim() === "") throw unauthenticated("No bearer token was sent.");
  if (authorization.length > MAX_TOKEN_LENGTH)
    throw unauthenticated(`The bearer token is longer than ${MAX_TOKEN_LENGTH} characters.`);
  const match = BEARER.exec(authorization);
  if (match?.[1] === undefined) throw unauthenticated("The Authorization header is not of the form 'Bearer <token>'.");
  return match[1];
}

export async function createAuthenticator(config: AuthConfig, deps: AuthenticatorDeps = {}): Promise<Authenticator> {
  const mapping: ClaimMapping = {
    tenantClaim: config.tenantClaim,
    domainsClaim: config.domainsClaim,
    scopeDomains: config.scopeDomains,
    platformAdminClaim: config.platformAdminClaim,
  };
  if (config.issuer === undefined) return localAuthenticator(config, mapping, deps);
  return resourceServer(config.issuer, config, mapping, deps);
}

async function localAuthenticator(
  config: AuthConfig,
  mapping: ClaimMapping,
  deps: AuthenticatorDeps,
): Promise<Authenticator> {
  if (deps.keyStore === undefined)
    throw new AuthSetupError(
      "AUTH_LOCAL_KEY",
      "No AUTH_ISSUER is configured and no key store was given for the local development issuer.",
    );
  let issuer: Awaited<ReturnType<typeof openLocalIssuer>>;
  try {
    issuer = await openLocalIssuer(deps.keyStore, config);
  } catch (error: unknown) {
    throw new AuthSetupError("AUTH_LOCAL_KEY", error instanceof Error ? error.message : String(error), {
      cause: error,
    });
  }
  const now = deps.now ?? Date.now;
  const verifier = createJwtVerifier({
    issuer: issuer.issuer,
    audience: config.audience,
    algorithms: ["ES256"],
    clockSkewSeconds: config.clockSkewSeconds,
    requireAccessTokenTyp: true,
    maxTokenLifetimeSeconds: config.maxTokenLifetimeSeconds,
    keys: createLocalJWKSet(issuer.jwks),
    now,
  });
  const where = deps.keyStore.location ?? "the data directory";
  const authenticator = authenticatorFrom({
    description:
      `local development issuer (key in ${where}); get a token with npm run token -- --tenant <tenant> ` +
      `--domains "Development,Setup: Agents"`,
    verifier,
    introspector: undefined,
    introspectionCacheSeconds: 0,
    mapping,
    now,
  });
  return { ...authenticator, localIssuer: issuer };
}

async function resourceServer(
  issuer: URL,
  config: AuthConfig,
  mapping: ClaimMapping,
  deps: AuthenticatorDeps,
): Promise<Authenticator> {
  const execute = config.allowHttpIssuer ? [oidc.allowInsecureRequests] : [];
  const clientAuth =
    config.introspection === undefined ? oidc.None() : oidc.ClientSecretBasic(config.introspection.clientSecret);
  const clientId = config.introspection?.clientId ?? config.audience;
  const fetchImpl = deps.fetch;
  let configuration: oidc.Configuration;
  try {
    configuration = await oidc.discovery(issuer, clientId, undefined, clientAuth, {
      execute,
      timeout: 10,
      ...(fetchImpl === undefined
        ? {}
        : { [oidc.customFetch]: (url: string, init: oidc.CustomFetchOptions) => fetchImpl(url, init as RequestInit) }),
    });
  } catch (error: unknown) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new AuthSetupError("AUTH_DISCOVERY_FAILED", `OpenID discovery of ${issuer.href} failed: ${reason}`, {
      cause: scrub(error, config.introspection?.clientSecret ?? ""),
    });
  }
  const metadata = configuration.serverMetadata();
  const endpoint = (name: "jwks_uri" | "introspection_endpoint"): URL => {
    const value = metadata[name];
    if (typeof value !== "string")
      throw new AuthSetupError("AUTH_ISSUER_METADATA", `The issuer ${metadata.issuer} publishes no ${name}.`);
    const url = new URL(value);
    if (url.protocol !== "https:" && !(url.protocol === "http:" && config.allowHttpIssuer)) {
      throw new AuthSetupError(
        "AUTH_ISSUER_METADATA",
        `The issuer's ${name} ${url.href} is not https:// (set AUTH_ALLOW_HTTP_ISSUER=true to allow http).`,
      );
    }
    return url;
  };
  const now = deps.now ?? Date.now;
  const verifier = createJwtVerifier({
    issuer: metadata.issuer,
    audience: config.audience,
    algorithms: config.algorithms,
    clockSkewSeconds: config.clockSkewSeconds,
    requireAccessTokenTyp: config.requireAccessTokenTyp,
    maxTokenLifetimeSeconds: config.maxTokenLifetimeSeconds,
    keys: remoteKeys(endpoint("jwks_uri"), { now, ...(deps.fetch === undefined ? {} : { fetch: deps.fetch }) }),
    now,
  });
  let introspector: Introspector | undefined;
  if (config.introspection !== undefined) {
    endpoint("introspection_endpoint");
    introspector = createIntrospector({
      configuration,
      audience: config.audience,
      clockSkewSeconds: config.clockSkewSeconds,
      requireIssAud: config.introspectionRequireIssAud,
      maxTokenLifetimeSeconds: config.maxTokenLifetimeSeconds,
      maxPerSecond: config.introspectionMaxPerSecond,
      now: () => Math.floor(now() / 1000),
    });
  }
  const description =
    `OAuth2 resource server for ${metadata.issuer} (audience "${config.audience}"; ` +
    `JWT via JWKS, ${config.algorithms.join("/")}; ` +
    `introspection ${introspector === undefined ? "off" : "on"})`;
  return authenticatorFrom({
    description,
    verifier,
    introspector,
    introspectionCacheSeconds: config.introspectionCacheSeconds,
    mapping,
    now,
  });
}

/**
 * What an authenticator is made of. createAuthenticator assembles one per mode; tests assemble their own to
 * count verifications.
 */
export interface AuthenticatorParts {
  readonly description: string;
  readonly verifier: JwtVerifier;
  /** Undefined: opaque tokens are refused. */
  readonly introspector: Introspector | undefined;
  /** How long an active introspection answer is reused, in seconds; 0: never. */
  readonly introspectionCacheSeconds: number;
  readonly mapping: ClaimMapping;
  /** The clock of the token cache, in ms since the epoch; the same one the verifier and introspector use. */
  readonly now: () => number;
  /**
   * Bounds of the token cache; default TOKEN_CACHE_MAX_ENTRIES entries and TOKEN_CACHE_MAX_AGE_MS (also the
   * ceiling).
   */
  readonly cache?: { readonly maxEntries?: number; readonly maxAgeMs?: number };
}

/**
 * The authenticator over its parts, with the token cache in front of both
 * checks. The cache holds Principals, not claims: the mapping from claims is
 * deterministic for the life of the authenticator (its ClaimMapping is fixed),
 * so a hit skips it too, and no raw claims are kept in memory. A token is
 * cached only after its signature and claims (or its introspection answer)
 * passed and its claims mapped to a Principal; every failure, 401 or 503,
 * leaves the cache as it was.
 */
export function authenticatorFrom(parts: AuthenticatorParts): Authenticator {
  const { description, verifier, introspector, mapping } = parts;
  const cache = createTokenCache<Principal>({ now: parts.now, ...parts.cache });
  const introspectionTtlMs = parts.introspectionCacheSeconds * 1000;
  /** The full checks under way (not rechecks), by token: a token is checked once however many requests bring it. */
  const inFlight = new Map<TokenKey, Promise<Principal>>();
  /** The full check of a token (no cache read), caching what passes. */
  const check = async (token: string, key: TokenKey): Promise<Principal> => {
    if (looksLikeJwt(token)) {
      const claims = await verifier.verify(token);
      const principal = principalFromClaims(claims, mapping);
      // The verifier requires exp; without one (a verifier that does not) nothing is cached rather than
      // something unbounded.
      if (typeof claims.exp === "number") cache.set(key, principal, { notAfterMs: claims.exp * 1000 });
      return principal;
    }
    if (introspector === undefined)
      throw unauthenticated("The bearer token is not a JWT, and this service has no token introspection configured.");
    const claims = await introspector.introspect(token);
    const principal = principalFromClaims(claims, mapping);
    if (introspectionTtlMs > 0) {
      cache.set(key, principal, {
        ttlMs: introspectionTtlMs,
        ...(typeof claims.exp === "number" ? { notAfterMs: claims.exp * 1000 } : {}),
      });
    }
    return principal;
  };
  return {
    description,
    async authenticate(authorization) {
      const token = bearerToken(authorization);
      // The key is the hash of the whole token: any other byte (signature, payload, audience) misses and is
      // checked in full.
      const key = tokenKey(token);
      const cached = cache.get(key);
      if (cached !== undefined) return copyOf(cached);
      // One full check of a token at a time: the requests that bring it meanwhile (a burst of one caller's
      // connections, all read before the first check ends) wait for that one, whatever it answers.
      let checking = inFlight.get(key);
      if (checking === undefined) {
        checking = check(token, key).finally(() => inFlight.delete(key));
        inFlight.set(key, checking);
      }
      return copyOf(await checking);
    },
    async recheck(authorization) {
      const token = bearerToken(authorization);
      const key = tokenKey(token);
      try {
        return copyOf(await check(token, key));
      } catch (error: unknown) {
        // Refused (revoked, expired, a key withdrawn): forgotten. An issuer that cannot be asked (503) says
        // nothing about the token: what the cache holds stays.
        if (error instanceof RegistryError && error.code === "UNAUTHENTICATED") cache.delete(key);
        throw error;
      }
    },
  };
}

/**
 * A Principal of its own for each request: what one request does with its domains cannot change what the
 * cache hands the next.
 */
function copyOf(principal: Principal): Principal {
  return {
    subject: principal.subject,
    tenant: principal.tenant,
    domains: new Set(principal.domains),
    platformAdmin: principal.platformAdmin,
    ...(principal.expiresAt === undefined ? {} : { expiresAt: principal.expiresAt }),
  };
}
