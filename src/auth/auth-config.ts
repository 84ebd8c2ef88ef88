/**
 * The authentication settings, parsed once from an injected environment.
 * Every security-relevant default is explicit here; insecure options need an
 * explicit opt-in. Problems are returned, not thrown, so the caller can list
 * them together with its own.
 */

/** Signature algorithms a token may use. HMAC (`HS*`) and `none` are never accepted. */
export const ASYMMETRIC_ALGORITHMS: readonly string[] = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"];

/** Credentials of this service as a client of the issuer's RFC 7662 introspection endpoint. A secret: never log it. */
export interface IntrospectionCredentials {
  readonly clientId: string;
  readonly clientSecret: string;
}

export interface AuthConfig {
  /**
   * `AUTH_ISSUER`: the OAuth2/OpenID issuer whose tokens are accepted (its
   * metadata comes from OpenID discovery, `/.well-known/openid-configuration`).
   * Unset: the local development issuer, whose key lives in the data directory
   * (`npm run token` signs tokens with it).
   */
  readonly issuer: URL | undefined;
  /** `AUTH_AUDIENCE`, default `asor`: the `aud` a token must name. */
  readonly audience: string;
  /** `AUTH_TENANT_CLAIM`, default `tenant`: the claim naming the caller's tenant. */
  readonly tenantClaim: string;
  /**
   * `AUTH_DOMAINS_CLAIM`, default `domains`: the claim listing the security
   * domains granted (a JSON array of names, or one comma-separated string).
   */
  readonly domainsClaim: string;
  /**
   * `AUTH_SCOPE_DOMAINS`, default `{}`: a JSON object mapping an OAuth2 scope
   * to the security domains it grants, e.g.
   * `{"asor.read":["Setup: Agents"],"asor.write":["Development"]}`.
   */
  readonly scopeDomains: ReadonlyMap<string, readonly string[]>;
  /**
   * `AUTH_ALGORITHMS`, default `RS256,PS256,ES256,EdDSA`: the JWS algorithms a
   * JWT access token may be signed with (comma-separated). `none` and HMAC are refused.
   */
  readonly algorithms: readonly string[];
  /** `AUTH_CLOCK_SKEW_SECONDS`, default 30 (0 to 300): tolerance when checking `exp` and `nbf`. */
  readonly clockSkewSeconds: number;
  /**
   * `AUTH_INTROSPECTION_CLIENT_ID` and `AUTH_INTROSPECTION_CLIENT_SECRET` (both
   * or neither): when set, tokens that are not JWTs are checked through the
   * issuer's RFC 7662 introspection endpoint with these client credentials.
   */
  readonly introspection: IntrospectionCredentials | undefined;
  /**
   * `AUTH_INTROSPECTION_CACHE_SECONDS`, default 10 (0 to 60; 0 asks the issuer
   * on every request): how long an active introspection answer is reused for
   * the same token, never past its `exp`. A token revoked at the issuer is
   * still accepted for at most this long.
   */
  readonly introspectionCacheSeconds: number;
  /**
   * `AUTH_ALLOW_HTTP_ISSUER`, default `false`: `true` allows an `http://`
   * issuer (and http JWKS and introspection endpoints), e.g. on loopback in
   * tests. Never in production.
   */
  readonly allowHttpIssuer: boolean;
}

export const DEFAULT_ALGORITHMS: readonly string[] = ["RS256", "PS256", "ES256", "EdDSA"];

/**
 * Default of `AUTH_INTROSPECTION_CACHE_SECONDS`: short, because introspection
 * is chosen for quick revocation; long enough to spare the issuer a round trip
 * per request of a busy client.
 */
export const DEFAULT_INTROSPECTION_CACHE_SECONDS = 10;
/** Upper bound of `AUTH_INTROSPECTION_CACHE_SECONDS`: no answer outlives the verified-token cache (60 s). */
export const MAX_INTROSPECTION_CACHE_SECONDS = 60;

/** Parses the `AUTH_*` variables; every bad one is listed in `problems`, and `config` then holds defaults for it. */
export function parseAuthConfig(env: Readonly<Record<string, string | undefined>>): { config: AuthConfig; problems: string[] } {
  const problems: string[] = [];
  const value = (name: string): string | undefined => {
    const raw = env[name]?.trim();
    return raw === undefined || raw === "" ? undefined : raw;
  };
  const name = (variable: string, fallback: string): string => {
    const raw = value(variable) ?? fallback;
    if (!/^[\x21-\x7e]+$/.test(raw)) problems.push(`${variable} must be a claim name without spaces, not "${raw}"`);
    return raw;
  };

  const allowHttpRaw = value("AUTH_ALLOW_HTTP_ISSUER") ?? "false";
  const allowHttpIssuer = allowHttpRaw === "true";
  if (allowHttpRaw !== "true" && allowHttpRaw !== "false") problems.push(`AUTH_ALLOW_HTTP_ISSUER must be true or false, not "${allowHttpRaw}"`);

  let issuer: URL | undefined;
  const issuerRaw = value("AUTH_ISSUER");
  if (issuerRaw !== undefined) {
    try {
      issuer = new URL(issuerRaw);
    } catch {
      problems.push(`AUTH_ISSUER is not a URL: "${issuerRaw}"`);
    }
    if (issuer !== undefined) {
      if (issuer.username !== "" || issuer.password !== "" || issuer.search !== "" || issuer.hash !== "") {
        problems.push("AUTH_ISSUER must be a plain https:// URL without credentials, query or fragment");
        issuer = undefined;
      } else if (issuer.protocol === "http:" && !allowHttpIssuer) {
        problems.push(`AUTH_ISSUER "${issuer.href}" uses http://; set AUTH_ALLOW_HTTP_ISSUER=true to allow that (never in production)`);
      } else if (issuer.protocol !== "https:" && issuer.protocol !== "http:") {
        problems.push(`AUTH_ISSUER must be an https:// URL, not ${issuer.protocol}//...`);
        issuer = undefined;
      }
    }
  }

  const audience = value("AUTH_AUDIENCE") ?? "asor";
  const tenantClaim = name("AUTH_TENANT_CLAIM", "tenant");
  const domainsClaim = name("AUTH_DOMAINS_CLAIM", "domains");

  const scopeDomains = new Map<string, readonly string[]>();
  const scopeDomainsRaw = value("AUTH_SCOPE_DOMAINS");
  if (scopeDomainsRaw !== undefined) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(scopeDomainsRaw);
    } catch {
      parsed = undefined;
    }
    const valid =
      typeof parsed === "object" &&
      parsed !== null &&
      !Array.isArray(parsed) &&
      Object.values(parsed).every((domains) => Array.isArray(domains) && domains.every((d) => typeof d === "string" && d.trim() !== ""));
    if (valid) {
      for (const [scope, domains] of Object.entries(parsed as Record<string, string[]>))
        scopeDomains.set(
          scope,
          domains.map((d) => d.trim()),
        );
    } else {
      problems.push('AUTH_SCOPE_DOMAINS must be a JSON object mapping each scope to an array of domain names, e.g. {"asor.write":["Development"]}');
    }
  }

  const algorithms = (value("AUTH_ALGORITHMS") ?? DEFAULT_ALGORITHMS.join(","))
    .split(",")
    .map((a) => a.trim())
    .filter((a) => a !== "");
  for (const algorithm of algorithms) {
    if (/^none$/i.test(algorithm)) problems.push('AUTH_ALGORITHMS must not contain "none": unsigned tokens are never accepted');
    else if (/^HS/i.test(algorithm)) problems.push(`AUTH_ALGORITHMS must not contain ${algorithm}: HMAC is refused (it would let a published public key sign tokens)`);
    else if (!ASYMMETRIC_ALGORITHMS.includes(algorithm)) problems.push(`AUTH_ALGORITHMS: unknown algorithm "${algorithm}" (use ${ASYMMETRIC_ALGORITHMS.join(", ")})`);
  }
  if (algorithms.length === 0) problems.push("AUTH_ALGORITHMS must name at least one algorithm");

  let clockSkewSeconds = 30;
  const skewRaw = value("AUTH_CLOCK_SKEW_SECONDS");
  if (skewRaw !== undefined) {
    const skew = Number(skewRaw);
    if (Number.isInteger(skew) && skew >= 0 && skew <= 300) clockSkewSeconds = skew;
    else problems.push(`AUTH_CLOCK_SKEW_SECONDS must be an integer from 0 to 300, not "${skewRaw}"`);
  }

  let introspection: IntrospectionCredentials | undefined;
  const clientId = value("AUTH_INTROSPECTION_CLIENT_ID");
  const clientSecret = env.AUTH_INTROSPECTION_CLIENT_SECRET === "" ? undefined : env.AUTH_INTROSPECTION_CLIENT_SECRET;
  if ((clientId === undefined) !== (clientSecret === undefined)) {
    problems.push("AUTH_INTROSPECTION_CLIENT_ID and AUTH_INTROSPECTION_CLIENT_SECRET must be set together (or neither)");
  } else if (clientId !== undefined && clientSecret !== undefined) {
    if (issuerRaw === undefined) problems.push("AUTH_INTROSPECTION_CLIENT_ID is set but AUTH_ISSUER is not: introspection needs an issuer");
    else introspection = { clientId, clientSecret };
  }

  let introspectionCacheSeconds = DEFAULT_INTROSPECTION_CACHE_SECONDS;
  const cacheRaw = value("AUTH_INTROSPECTION_CACHE_SECONDS");
  if (cacheRaw !== undefined) {
    const seconds = Number(cacheRaw);
    if (Number.isInteger(seconds) && seconds >= 0 && seconds <= MAX_INTROSPECTION_CACHE_SECONDS) introspectionCacheSeconds = seconds;
    else problems.push(`AUTH_INTROSPECTION_CACHE_SECONDS must be an integer from 0 to ${MAX_INTROSPECTION_CACHE_SECONDS}, not "${cacheRaw}"`);
  }

  const valid = algorithms.filter((a) => ASYMMETRIC_ALGORITHMS.includes(a));
  return {
    config: {
      issuer,
      audience,
      tenantClaim,
      domainsClaim,
      scopeDomains,
      algorithms: valid.length > 0 ? valid : DEFAULT_ALGORITHMS,
      clockSkewSeconds,
      introspection,
      introspectionCacheSeconds,
      allowHttpIssuer,
    },
    problems,
  };
}
