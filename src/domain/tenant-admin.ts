/**
 * What a tenant's admin keeps in the registry besides its definitions (issue 43, item 2): the tenant's
 * settings, and its providers' public keys, the trust roots the signatures of their submissions are verified
 * against.
 */

/** What a tenant requires of the signatures of submitted definitions. */
export const SIGNATURE_POLICIES = ["OPTIONAL", "REQUIRED_FOR_KEYED_PROVIDERS", "REQUIRED"] as const;
export type SignaturePolicy = (typeof SIGNATURE_POLICIES)[number];

/** Who may read a tenant's discovery routes (issue 45): its tokens, or anyone. */
export const DISCOVERY_POLICIES = ["TOKEN", "PUBLIC"] as const;
export type DiscoveryPolicy = (typeof DISCOVERY_POLICIES)[number];

/** A tenant's settings: every one of them, the defaults where none was set. Later settings join here. */
export interface TenantSettings {
  readonly signatures: SignaturePolicy;
  readonly discovery: DiscoveryPolicy;
}

/** The settings of a tenant that never changed one. */
export const DEFAULT_TENANT_SETTINGS: TenantSettings = Object.freeze({ signatures: "OPTIONAL", discovery: "TOKEN" });

/** A public key to hold for a provider, as validated (jwks.ts): its id, its one algorithm, its JWK's JSON. */
export interface KeyToHold {
  readonly kid: string;
  readonly alg: string;
  /** The public JWK as JSON text in one canonical form (jwks.ts), so the same key always has the same text. */
  readonly jwk: string;
}

/** A provider key the registry holds. */
export interface ProviderKey extends KeyToHold {
  readonly createdAt: Date;
  /** When it was revoked; null while active. A revoked key is kept: its kid cannot name another key. */
  readonly revokedAt: Date | null;
}

/** A provider's keys after a change, and the kids the change revoked (what issue 43's item 5 re-marks). */
export interface ProviderKeyChange {
  /** Every key the provider has had, active and revoked, by kid. */
  readonly keys: readonly ProviderKey[];
  /** The kids this change revoked (none when it revoked nothing, e.g. a key revoked before). */
  readonly revoked: readonly string[];
}

/** JWK members the contract's JsonWebKey leaves out on purpose, and why, for the refusal's message. */
const REFUSED_JWK_MEMBERS: ReadonlyMap<string, string> = new Map([
  ...["d", "p", "q", "dp", "dq", "qi", "oth", "k"].map(
    (m) =>
      [
        m,
        "a private key member: the registry holds public keys only (take a private key sent anywhere as exposed)",
      ] as const,
  ),
  ...["x5c", "x5u", "x5t", "x5t#S256"].map(
    (m) => [m, "a certificate member: the registry holds keys, never chains or links, and fetches nothing"] as const,
  ),
]);

/**
 * Why the unknown member `name` of a message of type `typeName` is refused, when the contract leaves it out on
 * purpose (a JWK's private and certificate members); undefined for any other member.
 */
export function refusedMemberReason(typeName: string, name: string): string | undefined {
  return typeName === "asor.v1.JsonWebKey" ? REFUSED_JWK_MEMBERS.get(name) : undefined;
}
