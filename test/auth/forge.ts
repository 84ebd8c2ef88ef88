// Builds bad tokens by hand with jose, for the rejection tests.
import { base64url, type CryptoKey, exportSPKI, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose";
import { RegistryError } from "../../src/domain/errors.js";

/** A JWT signed with `key` (ES256), with exactly these claims and header. */
export function sign(
  key: CryptoKey,
  kid: string | undefined,
  claims: JWTPayload,
  header: Record<string, unknown> = {},
): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "ES256", typ: "at+jwt", ...(kid === undefined ? {} : { kid }), ...header })
    .sign(key);
}

/** An unsecured JWT (`alg: none`): header and payload, empty signature. */
export function unsigned(claims: JWTPayload): string {
  const part = (value: unknown): string => base64url.encode(JSON.stringify(value));
  return `${part({ alg: "none", typ: "JWT" })}.${part(claims)}.`;
}

/** HS256 tokens whose HMAC secret is the issuer's public key, as JWK JSON and as PEM (the key-confusion attack). */
export async function hmacWithPublicKey(
  publicJwk: JWK,
  publicKey: CryptoKey | undefined,
  kid: string,
  claims: JWTPayload,
): Promise<string[]> {
  const secrets = [new TextEncoder().encode(JSON.stringify(publicJwk))];
  if (publicKey !== undefined) secrets.push(new TextEncoder().encode(await exportSPKI(publicKey)));
  return Promise.all(
    secrets.map((secret) => new SignJWT(claims).setProtectedHeader({ alg: "HS256", typ: "JWT", kid }).sign(secret)),
  );
}

/** The token with its payload replaced (claims changed), header and signature kept. */
export function tamper(token: string, change: (claims: Record<string, unknown>) => void): string {
  const [header, payload, signature] = token.split(".") as [string, string, string];
  const claims = JSON.parse(new TextDecoder().decode(base64url.decode(payload))) as Record<string, unknown>;
  change(claims);
  return `${header}.${base64url.encode(JSON.stringify(claims))}.${signature}`;
}

export async function newKey(): Promise<{ privateKey: CryptoKey; publicKey: CryptoKey }> {
  return generateKeyPair("ES256", { extractable: true });
}

export const now = (): number => Math.floor(Date.now() / 1000);

/** The RegistryError a promise rejects with; fails the test if it resolves or rejects with something else. */
export async function rejection(promise: Promise<unknown>): Promise<RegistryError> {
  try {
    await promise;
  } catch (error: unknown) {
    if (error instanceof RegistryError) return error;
    throw error;
  }
  throw new Error("expected a rejection, but the promise resolved");
}

/** Everything an error shows (message, issues, cause), to check that the token is not in it. */
export function shown(error: RegistryError): string {
  return JSON.stringify({
    message: error.message,
    issues: error.issues,
    cause: String(error.cause ?? ""),
    stack: error.stack,
  });
}
