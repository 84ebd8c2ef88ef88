/**
 * The check of a provider's JWKS (issue 43, item 2): the public keys a tenant's admin sets as a provider's trust
 * roots. Every problem is listed with its path (`keys[1].alg`); a key that passes the member rules is imported
 * with jose to prove it is the key its members describe. What is accepted is fixed here, explicitly:
 *
 * - `EC` on `P-256` with `ES256`, `OKP` `Ed25519` with `EdDSA`, `RSA` of 2048 to 4096 bits with `RS256` or
 *   `PS256`; every key names its one `alg` (a signature is verified under the key's algorithm only, never the
 *   one its header claims);
 * - no symmetric key (`oct`), no `none`, no HMAC: a public key as an HMAC secret is the classic forgery;
 * - `use`, when present, is `sig`; each `kid` once, as identifying text (identifying-text.ts).
 *
 * Private members (`d`, `p`, `q`, `dp`, `dq`, `qi`, `oth`, `k`) and certificate members (`x5c`, `x5u`, `x5t`)
 * are not members of the contract's JsonWebKey, so decoding refuses them with their path before this check.
 */
import { base64url, importJWK } from "jose";
import type { JsonWebKey as Jwk } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { type Issue, issueAt } from "./errors.js";
import { identifyingTextProblem } from "./identifying-text.js";
import type { KeyToHold } from "./tenant-admin.js";

/** The key types and, for each, its curve (none for RSA), the algorithms it may name and its members. */
const KEY_TYPES: Readonly<Record<string, { crv?: string; algs: readonly string[]; members: readonly MemberName[] }>> = {
  EC: { crv: "P-256", algs: ["ES256"], members: ["x", "y"] },
  OKP: { crv: "Ed25519", algs: ["EdDSA"], members: ["x"] },
  RSA: { algs: ["RS256", "PS256"], members: ["n", "e"] },
};

type MemberName = "x" | "y" | "n" | "e";
const KEY_MEMBERS: readonly MemberName[] = ["x", "y", "n", "e"];

/** The most keys a provider's set holds (the contract's `max_items` of JsonWebKeySet.keys). */
export const MAX_PROVIDER_KEYS = 20;

/** The bounds of an RSA modulus, in bits: under 2048 is breakable, over 4096 makes every verification slow. */
const RSA_MIN_BITS = 2048;
const RSA_MAX_BITS = 4096;

/** The checked keys, in the set's order, each as it is held (canonical JSON), or every problem of the set. */
export type CheckedKeys =
  | { readonly keys: readonly KeyToHold[]; readonly issues?: undefined }
  | { readonly issues: readonly Issue[]; readonly keys?: undefined };

/**
 * Checks a provider's keys (the contract's rules, required members and lengths, are checked before: a key
 * missing `kty`, `kid` or `alg` is left to them). `at` is the path of the list (`keys`).
 */
export async function checkProviderKeys(keys: readonly Jwk[], at = "keys"): Promise<CheckedKeys> {
  const issues: Issue[] = [];
  const seen = new Map<string, number>();
  const held: KeyToHold[] = [];
  for (const [i, key] of keys.entries()) {
    const path = `${at}[${i}]`;
    const own = memberIssues(key, path);
    const first = seen.get(key.kid);
    if (key.kid !== "" && first !== undefined)
      own.push(issueAt(`${path}.kid`, "DUPLICATE_KID", `${path}.kid: "${key.kid}" is the kid of ${at}[${first}] too.`));
    else seen.set(key.kid, i);
    if (own.length === 0 && key.kty !== "" && key.alg !== "" && key.kid !== "") {
      const jwk = canonicalJwk(key);
      if (await imports(jwk)) held.push({ kid: key.kid, alg: key.alg, jwk: JSON.stringify(jwk) });
      else own.push({ code: "MALFORMED_KEY", message: `${path} is not a valid ${key.kty} public key.`, path });
    }
    issues.push(...own);
  }
  return issues.length > 0 ? { issues } : { keys: held };
}

/** The problems of one key's members (not its import). */
function memberIssues(key: Jwk, path: string): Issue[] {
  const issues: Issue[] = [];
  const problem = key.kid === "" ? undefined : identifyingTextProblem(key.kid);
  if (problem !== undefined) issues.push(issueAt(`${path}.kid`, "INVALID_CHARACTER", `${path}.kid ${problem}`));
  if (key.use !== undefined && key.use !== "sig")
    issues.push(issueAt(`${path}.use`, "NOT_ALLOWED", `${path}.use must be "sig": these keys verify signatures.`));
  if (key.kty === "") return issues;
  const type = KEY_TYPES[key.kty];
  if (type === undefined) {
    const why = key.kty === "oct" ? " (a symmetric key: the registry holds public keys only)" : "";
    issues.push(issueAt(`${path}.kty`, "NOT_ALLOWED", `${path}.kty must be EC, OKP or RSA, not "${key.kty}"${why}.`));
    return issues;
  }
  if (key.alg !== "" && !type.algs.includes(key.alg))
    issues.push(
      issueAt(
        `${path}.alg`,
        "NOT_ALLOWED",
        `${path}.alg must be ${type.algs.join(" or ")} for a ${key.kty} key, ` + `not "${key.alg}".`,
      ),
    );
  if ((key.crv ?? undefined) !== type.crv)
    issues.push(
      type.crv === undefined
        ? issueAt(`${path}.crv`, "INVALID_VALUE", `${path}.crv is not a member of an RSA key.`)
        : issueAt(`${path}.crv`, "NOT_ALLOWED", `${path}.crv must be "${type.crv}" for a ${key.kty} key.`),
    );
  for (const member of KEY_MEMBERS) {
    const value = key[member];
    const wanted = type.members.includes(member);
    if (wanted && (value === undefined || value === ""))
      issues.push(issueAt(`${path}.${member}`, "REQUIRED", `${path}.${member} is required for a ${key.kty} key.`));
    if (!wanted && value !== undefined)
      issues.push(
        issueAt(`${path}.${member}`, "INVALID_VALUE", `${path}.${member} is not a member of a ${key.kty} key.`),
      );
  }
  if (key.kty === "RSA" && key.n !== undefined && key.n !== "") {
    const bits = modulusBits(key.n);
    if (bits < RSA_MIN_BITS || bits > RSA_MAX_BITS)
      issues.push(
        issueAt(
          `${path}.n`,
          "OUT_OF_RANGE",
          `${path}.n is a ${bits}-bit modulus; ${RSA_MIN_BITS} to ${RSA_MAX_BITS} bits are accepted.`,
        ),
      );
  }
  return issues;
}

/** The bits of a base64url modulus, leading zero bits left out. */
function modulusBits(n: string): number {
  let bytes: Uint8Array;
  try {
    bytes = base64url.decode(n);
  } catch {
    // Not base64url: the import says so (MALFORMED_KEY).
    return RSA_MIN_BITS;
  }
  let first = 0;
  while (first < bytes.length && bytes[first] === 0) first++;
  if (first === bytes.length) return 0;
  return (bytes.length - first) * 8 - Math.clz32(bytes[first] as number) + 24;
}

/** The key's public members in one form (members sorted, `use` always `sig`), the text the registry holds. */
function canonicalJwk(key: Jwk): Record<string, string> {
  const members: Record<string, string | undefined> = {
    alg: key.alg,
    crv: key.crv,
    e: key.e,
    kid: key.kid,
    kty: key.kty,
    n: key.n,
    use: "sig",
    x: key.x,
    y: key.y,
  };
  return Object.fromEntries(Object.entries(members).filter((e): e is [string, string] => e[1] !== undefined));
}

/** Whether jose imports `jwk` as a public key of its `alg`. */
async function imports(jwk: Record<string, string>): Promise<boolean> {
  try {
    // A public JWK imports as a public CryptoKey; only `oct` would give bytes, and it was refused before.
    return !((await importJWK(jwk, jwk.alg)) instanceof Uint8Array);
  } catch {
    return false;
  }
}
