/**
 * The authentication settings, parsed once from an injected environment.
 * Every security-relevant default is explicit here; insecure options need an
 * explicit opt-in. Problems are returned, not thrown, so the caller can list
 * them together with its own.
 */
import { type EnvReader, envReader } from "../env.js";

/** Signature algorithms a token may use. HMAC (`HS*`) and `none` are never accepted. */
export const ASYMMETRIC_ALGORITHMS: readonly string[] = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
  "Ed25519",
];

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
  /** `AUTH_CLOCK_SKEW_SECONDS`, default 30 (0 to 300): tolerance when checking `exp`, `nbf` and `iat`. */
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
  /**
   * `AUTH_ALLOW_DEV_ISSUER`, default `false`: `true` serves the local
   * development issuer (no `AUTH_ISSUER`) on a `HOST` that is not loopback.
   * Whoever can read its key file mints any token for any tenant, so without
   * this setting the service refuses to start on such a host.
   */
  readonly allowDevIssuer: boolean;
  /**
   * `AUTH_REQUIRE_AT_JWT_TYP`, default `true`: a JWT access token must carry
   * the RFC 9068 header `typ: at+jwt` (so an ID token is never taken for an
   * access token). `false`, for issuers that do not set it: a JWT without that
   * typ is accepted unless its header names another type or it carries an ID
   * token's claims (`nonce`, `at_hash`, `c_hash`, `s_hash`).
   */
  readonly requireAccessTokenTyp: boolean;
  /**
   * `AUTH_MAX_TOKEN_LIFETIME_SECONDS`, default 86400 (24 h; 60 to 31536000):
   * the longest lifetime (`exp` - `iat`, or `exp` - now without `iat`) of an
   * accepted token. A token issued in the future (`iat` beyond the clock skew)
   * is refused too.
   */
  readonly maxTokenLifetimeSeconds: number;
  /**
   * `AUTH_INTROSPECTION_REQUIRE_ISS_AUD`, default `true`: an active
   * introspection answer must name this issuer (`iss`) and `AUTH_AUDIENCE`
   * (`aud`). `false` accepts answers without them (a bare `{"active": true}`);
   * those it carries are still checked.
   */
  readonly introspectionRequireIssAud: boolean;
  /**
   * `AUTH_INTROSPECTION_MAX_PER_SECOND`, default 20 (1 to 1000): the most
   * introspection requests per second (a burst of as many, then this rate), so
   * a flood of random opaque tokens cannot flood the issuer. Past it, a token
   * not already in the cache is answered 503 (retry later).
   */
  readonly introspectionMaxPerSecond: number;
  /**
   * `AUTH_NO_TENANT_CLAIM_USES_DEFAULT`, default `true` with the local
   * development issuer and `false` with `AUTH_ISSUER`: whether a token without
   * the tenant claim acts on `DEFAULT_TENANT`. When not, such a token is
   * refused (403, naming the claim) by every operation but the tenant admin
   * RPCs (which take a platform operator's token, AUTH_PLATFORM_ADMIN_CLAIM).
   */
  readonly noTenantClaimUsesDefault: boolean;
  /**
   * `AUTH_PLATFORM_ADMIN_CLAIM`, default `platform_admin`: the claim that,
   * when it is JSON `true`, makes a token a platform operator's, the only
   * tokens the tenant admin RPCs admit (with `AUTH_ADMIN_DOMAIN`). A token
   * without a tenant claim is not one by that alone.
   */
  readonly platformAdminClaim: string;
}

export const DEFAULT_ALGORITHMS: readonly string[] = ["RS256", "PS256", "ES256", "EdDSA"];

/** Default of `AUTH_MAX_TOKEN_LIFETIME_SECONDS`: 24 h, longer than any access token an issuer should hand out. */
export const DEFAULT_MAX_TOKEN_LIFETIME_SECONDS = 86_400;
/** Default of `AUTH_INTROSPECTION_MAX_PER_SECOND`. */
export const DEFAULT_INTROSPECTION_MAX_PER_SECOND = 20;
/** The claim that marks a platform operator's token (AUTH_PLATFORM_ADMIN_CLAIM). */
export const DEFAULT_PLATFORM_ADMIN_CLAIM = "platform_admin";

/**
 * Default of `AUTH_INTROSPECTION_CACHE_SECONDS`: short, because introspection
 * is chosen for quick revocation; long enough to spare the issuer a round trip
 * per request of a busy client.
 */
export const DEFAULT_INTROSPECTION_CACHE_SECONDS = 10;
/** Upper bound of `AUTH_INTROSPECTION_CACHE_SECONDS`: no answer outlives the verified-token cache (60 s). */
export const MAX_INTROSPECTION_CACHE_SECONDS = 60;

/**
 * Parses the `AUTH_*` variables; every bad one is listed in `problems`, and `config` then holds defaults for it.
 * The variables are read in a fixed order (the issuer, the claims, the algorithms, introspection, the rest), which
 * is the order of `problems`.
 */
export function parseAuthConfig(env: Readonly<Record<string, string | undefined>>): {
  config: AuthConfig;
  problems: string[];
} {
  const problems: string[] = [];
  const read = envReader(env, problems);
  const { value, integer, flag } = read;

  const allowHttpIssuer = flag("AUTH_ALLOW_HTTP_ISSUER", false);
  const issuerRaw = value("AUTH_ISSUER");
  const issuer = issuerRaw === undefined ? undefined : readIssuer(issuerRaw, allowHttpIssuer, problems);
  const audience = value("AUTH_AUDIENCE") ?? "asor";
  const tenantClaim = readClaimName(read, problems, "AUTH_TENANT_CLAIM", "tenant");
  const domainsClaim = readClaimName(read, problems, "AUTH_DOMAINS_CLAIM", "domains");
  const scopeDomains = readScopeDomains(value("AUTH_SCOPE_DOMAINS"), problems);
  const algorithms = readAlgorithms(value("AUTH_ALGORITHMS"), problems);
  const clockSkewSeconds = integer("AUTH_CLOCK_SKEW_SECONDS", 30, 0, 300);
  const introspection = readIntrospection(read, env, issuerRaw !== undefined, problems);
  const introspectionCacheSeconds = integer(
    "AUTH_INTROSPECTION_CACHE_SECONDS",
    DEFAULT_INTROSPECTION_CACHE_SECONDS,
    0,
    MAX_INTROSPECTION_CACHE_SECONDS,
  );
  const allowDevIssuer = flag("AUTH_ALLOW_DEV_ISSUER", false);
  const requireAccessTokenTyp = flag("AUTH_REQUIRE_AT_JWT_TYP", true);
  const maxTokenLifetimeSeconds = integer(
    "AUTH_MAX_TOKEN_LIFETIME_SECONDS",
    DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
    60,
    31_536_000,
  );
  const introspectionRequireIssAud = flag("AUTH_INTROSPECTION_REQUIRE_ISS_AUD", true);
  const introspectionMaxPerSecond = integer(
    "AUTH_INTROSPECTION_MAX_PER_SECOND",
    DEFAULT_INTROSPECTION_MAX_PER_SECOND,
    1,
    1000,
  );
  // On by default only for the local development issuer: there every token is the developer's own.
  const noTenantClaimUsesDefault = flag("AUTH_NO_TENANT_CLAIM_USES_DEFAULT", issuerRaw === undefined);
  const platformAdminClaim = readClaimName(read, problems, "AUTH_PLATFORM_ADMIN_CLAIM", DEFAULT_PLATFORM_ADMIN_CLAIM);

  return {
    config: {
      issuer,
      audience,
      tenantClaim,
      domainsClaim,
      scopeDomains,
      algorithms,
      clockSkewSeconds,
      introspection,
      introspectionCacheSeconds,
      allowHttpIssuer,
      allowDevIssuer,
      requireAccessTokenTyp,
      maxTokenLifetimeSeconds,
      introspectionRequireIssAud,
      introspectionMaxPerSecond,
      noTenantClaimUsesDefault,
      platformAdminClaim,
    },
    problems,
  };
}

/** A claim's name (`variable`, else `fallback`): printable ASCII without spaces. */
function readClaimName(read: EnvReader, problems: string[], variable: string, fallback: string): string {
  const raw = read.value(variable) ?? fallback;
  if (!/^[\x21-\x7e]+$/.test(raw)) problems.push(`${variable} must be a claim name without spaces, not "${raw}"`);
  return raw;
}

/**
 * `AUTH_ISSUER`: a plain https:// URL (http:// only with AUTH_ALLOW_HTTP_ISSUER, and then kept with its problem
 * when not allowed); undefined when it is not one.
 */
function readIssuer(raw: string, allowHttpIssuer: boolean, problems: string[]): URL | undefined {
  let issuer: URL;
  try {
    issuer = new URL(raw);
  } catch {
    problems.push(`AUTH_ISSUER is not a URL: "${raw}"`);
    return undefined;
  }
  if (issuer.username !== "" || issuer.password !== "" || issuer.search !== "" || issuer.hash !== "") {
    problems.push("AUTH_ISSUER must be a plain https:// URL without credentials, query or fragment");
    return undefined;
  }
  if (issuer.protocol === "http:" && !allowHttpIssuer) {
    problems.push(
      `AUTH_ISSUER "${issuer.href}" uses http://; set AUTH_ALLOW_HTTP_ISSUER=true to allow that (never in ` +
        `production)`,
    );
  } else if (issuer.protocol !== "https:" && issuer.protocol !== "http:") {
    problems.push(`AUTH_ISSUER must be an https:// URL, not ${issuer.protocol}//...`);
    return undefined;
  }
  return issuer;
}

/** `AUTH_SCOPE_DOMAINS`: a JSON object of scope to domain names, each trimmed; empty when unset or bad. */
function readScopeDomains(raw: string | undefined, problems: string[]): Map<string, readonly string[]> {
  const scopeDomains = new Map<string, readonly string[]>();
  if (raw === undefined) return scopeDomains;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    parsed = undefined;
  }
  const valid =
    typeof parsed === "object" &&
    parsed !== null &&
    !Array.isArray(parsed) &&
    Object.values(parsed).every(
      (domains) => Array.isArray(domains) && domains.every((d) => typeof d === "string" && d.trim() !== ""),
    );
  if (valid) {
    for (const [scope, domains] of Object.entries(parsed as Record<string, string[]>))
      scopeDomains.set(
        scope,
        domains.map((d) => d.trim()),
      );
  } else {
    problems.push(
      "AUTH_SCOPE_DOMAINS must be a JSON object mapping each scope to an array of domain names, " +
        'e.g. {"asor.write":["Development"]}',
    );
  }
  return scopeDomains;
}

/**
 * `AUTH_ALGORITHMS` (comma-separated): a problem for each one refused or unknown; the asymmetric ones named, or
 * DEFAULT_ALGORITHMS when none is.
 */
function readAlgorithms(raw: string | undefined, problems: string[]): readonly string[] {
  const algorithms = (raw ?? DEFAULT_ALGORITHMS.join(","))
    .split(",")
    .map((a) => a.trim())
    .filter((a) => a !== "");
  for (const algorithm of algorithms) {
    if (/^none$/i.test(algorithm))
      problems.push('AUTH_ALGORITHMS must not contain "none": unsigned tokens are never accepted');
    else if (/^HS/i.test(algorithm))
      problems.push(
        `AUTH_ALGORITHMS must not contain ${algorithm}: HMAC is refused (it would let a published public key sign ` +
          `tokens)`,
      );
    else if (!ASYMMETRIC_ALGORITHMS.includes(algorithm))
      problems.push(`AUTH_ALGORITHMS: unknown algorithm "${algorithm}" (use ${ASYMMETRIC_ALGORITHMS.join(", ")})`);
  }
  if (algorithms.length === 0) problems.push("AUTH_ALGORITHMS must name at least one algorithm");
  const valid = algorithms.filter((a) => ASYMMETRIC_ALGORITHMS.includes(a));
  return valid.length > 0 ? valid : DEFAULT_ALGORITHMS;
}

/**
 * `AUTH_INTROSPECTION_CLIENT_ID` and `AUTH_INTROSPECTION_CLIENT_SECRET`, both or neither, and only with an issuer.
 * The secret is taken as it is (not trimmed).
 */
function readIntrospection(
  read: EnvReader,
  env: Readonly<Record<string, string | undefined>>,
  hasIssuer: boolean,
  problems: string[],
): IntrospectionCredentials | undefined {
  const clientId = read.value("AUTH_INTROSPECTION_CLIENT_ID");
  const clientSecret = env.AUTH_INTROSPECTION_CLIENT_SECRET === "" ? undefined : env.AUTH_INTROSPECTION_CLIENT_SECRET;
  if ((clientId === undefined) !== (clientSecret === undefined)) {
    problems.push(
      "AUTH_INTROSPECTION_CLIENT_ID and AUTH_INTROSPECTION_CLIENT_SECRET must be set together (or neither)",
    );
    return undefined;
  }
  if (clientId === undefined || clientSecret === undefined) return undefined;
  if (!hasIssuer) {
    problems.push("AUTH_INTROSPECTION_CLIENT_ID is set but AUTH_ISSUER is not: introspection needs an issuer");
    return undefined;
  }
  return { clientId, clientSecret };
}

/** Whether `host` (the `HOST` setting) only listens on this machine: `localhost`, 127.0.0.0/8 or ::1. */
export function isLoopbackHost(host: string): boolean {
  const bare = host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, "$1");
  if (bare === "localhost" || bare === "::1" || bare === "0:0:0:0:0:0:0:1") return true;
  return /^(::ffff:)?127(\.\d{1,3}){3}$/.test(bare);
}

/**
 * The start-up problem of serving the local development issuer on `host`, if
 * any: without `AUTH_ISSUER` a host that is not loopback needs
 * `AUTH_ALLOW_DEV_ISSUER=true`, since its key file mints any token.
 */
export function devIssuerProblem(host: string, config: AuthConfig): string | undefined {
  if (config.issuer !== undefined || config.allowDevIssuer || isLoopbackHost(host)) return undefined;
  return (
    `HOST "${host}" is not a loopback address and AUTH_ISSUER is unset: set AUTH_ISSUER to your identity ` +
    `provider's URL ` +
    "(or, for a shared test machine only, AUTH_ALLOW_DEV_ISSUER=true to serve the local development issuer, whose " +
    "key file mints any token)"
  );
}
