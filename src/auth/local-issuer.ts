/**
 * The local development issuer: used when no AUTH_ISSUER is configured. Its
 * ES256 key is made on first use and kept (as a private JWK) by an injected
 * KeyStore, so this module stays free of file I/O. `npm run token` signs with
 * it; the service verifies its tokens with the same JWT verifier as any
 * issuer's, against a local JWKS.
 */
import {
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  importJWK,
  type JSONWebKeySet,
  type JWK,
  SignJWT,
} from "jose";
import { DEFAULT_PLATFORM_ADMIN_CLAIM } from "./auth-config.js";

/** The `iss` of locally issued tokens. */
export const LOCAL_ISSUER = "urn:asor:local-development";
const ALG = "ES256";

/** Keeps the local issuer's private key (a JSON string). */
export interface KeyStore {
  /** The stored key, or undefined when there is none yet. */
  readKey(): Promise<string | undefined>;
  /** Stores a new key; fails when one exists already (another process made it first). */
  writeKey(jwk: string): Promise<void>;
  /** Where the key lives, for the start-up line (e.g. `./data/dev-issuer.jwk`). */
  readonly location?: string;
}

/** What a locally issued token says. */
export interface LocalTokenRequest {
  /** `sub`; default `developer`. */
  readonly subject?: string;
  /** The tenant claim; omitted when undefined. */
  readonly tenant?: string;
  /** The domains claim. */
  readonly domains?: readonly string[];
  /** Lifetime in seconds; default 3600. */
  readonly ttlSeconds?: number;
  /** Sets the platform admin claim to `true` (the tenant admin RPCs even with a tenant claim). */
  readonly platformAdmin?: boolean;
}

export interface LocalIssuer {
  readonly issuer: string;
  readonly audience: string;
  /** The public key, as a JWKS for the verifier. */
  readonly jwks: JSONWebKeySet;
  /** Signs an access token (RFC 9068 `at+jwt`). */
  issue(request: LocalTokenRequest): Promise<string>;
}

export interface LocalIssuerOptions {
  readonly audience: string;
  readonly tenantClaim: string;
  readonly domainsClaim: string;
  /** The claim `platformAdmin` sets; default `platform_admin`. */
  readonly platformAdminClaim?: string;
}

/** Loads the key from the store, making and storing one on first use. */
export async function openLocalIssuer(keyStore: KeyStore, options: LocalIssuerOptions): Promise<LocalIssuer> {
  const privateJwk = await loadOrCreateKey(keyStore);
  const { d: _d, ...publicJwk } = privateJwk;
  const signingKey = await importJWK(privateJwk, ALG);
  return {
    issuer: LOCAL_ISSUER,
    audience: options.audience,
    jwks: { keys: [publicJwk] },
    async issue(request) {
      const ttl = request.ttlSeconds ?? 3600;
      if (!Number.isInteger(ttl) || ttl <= 0)
        throw new RangeError("The token lifetime must be a positive whole number of seconds.");
      const claims: Record<string, unknown> = { [options.domainsClaim]: [...(request.domains ?? [])] };
      if (request.tenant !== undefined) claims[options.tenantClaim] = request.tenant;
      if (request.platformAdmin === true) claims[options.platformAdminClaim ?? DEFAULT_PLATFORM_ADMIN_CLAIM] = true;
      return new SignJWT(claims)
        .setProtectedHeader({ alg: ALG, kid: publicJwk.kid as string, typ: "at+jwt" })
        .setIssuer(LOCAL_ISSUER)
        .setAudience(options.audience)
        .setSubject(request.subject ?? "developer")
        .setJti(crypto.randomUUID())
        .setIssuedAt()
        .setExpirationTime(`${ttl}s`)
        .sign(signingKey);
    },
  };
}

/**
 * The ES256 private JWK `keyStore` keeps, made (P-256, `kid` its RFC 7638 thumbprint) and stored on first use;
 * `label` names the key in the error a bad stored key raises. The card signing key made in DATA_DIR is made here
 * too (src/main/card-signing-key-files.ts).
 */
export async function loadOrCreateKey(keyStore: KeyStore, label = "local development issuer key"): Promise<JWK> {
  const stored = await keyStore.readKey();
  if (stored !== undefined) return parseKey(stored, keyStore, label);
  const { privateKey } = await generateKeyPair(ALG, { extractable: true });
  const jwk = await exportJWK(privateKey);
  const key: JWK = { ...jwk, alg: ALG, use: "sig", kid: await calculateJwkThumbprint(jwk) };
  try {
    await keyStore.writeKey(JSON.stringify(key));
    return key;
  } catch (error: unknown) {
    // Another process may have made the key at the same moment: use that one.
    const raced = await keyStore.readKey();
    if (raced !== undefined) return parseKey(raced, keyStore, label);
    throw error;
  }
}

function parseKey(text: string, keyStore: KeyStore, label: string): JWK {
  let key: unknown;
  try {
    key = JSON.parse(text);
  } catch {
    key = undefined;
  }
  const jwk = key as JWK | undefined;
  if (
    jwk?.kty !== "EC" ||
    jwk.crv !== "P-256" ||
    typeof jwk.d !== "string" ||
    typeof jwk.x !== "string" ||
    typeof jwk.kid !== "string"
  ) {
    throw new Error(
      `The ${label}${keyStore.location === undefined ? "" : ` in ${keyStore.location}`} ` +
        "is not an ES256 private JWK; delete it and a new one is made.",
    );
  }
  return { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y, d: jwk.d, alg: ALG, use: "sig", kid: jwk.kid };
}

/**
 * The warning logged at start-up, before the listening line, whenever the
 * local development issuer is on: its key file is all it takes to mint a token
 * for any tenant with any domain.
 */
export function developmentIssuerWarning(
  config: { readonly host: string },
  description: string,
): [string, Record<string, unknown>] {
  return [
    "the local development issuer is on: whoever can read its key file, or reach this port's development " +
      "sign-in (/ui/dev-token, the catalog's), mints any token for any tenant; set AUTH_ISSUER for anything but " +
      "development",
    { host: config.host, auth: description },
  ];
}
