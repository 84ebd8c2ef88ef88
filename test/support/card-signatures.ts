/** The registry's card signatures as a client checks them: @a2a-js/sdk's verification, keys from its JWKS. */
import { verifyAgentCardSignature } from "@a2a-js/sdk";
import type { JWK } from "jose";
import { expect } from "vitest";

/** A card as JSON, with its signatures. */
export type Card = Record<string, unknown> & { signatures?: { protected: string; signature: string }[] };

/** The registry's JWKS, fetched without a token, as a2a-js's `retrievePublicKey` looks a `kid` up in it. */
export async function jwksKeys(baseUrl: string): Promise<JWK[]> {
  const res = await fetch(`${baseUrl}/.well-known/jwks.json`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { keys: JWK[] }).keys;
}

/** a2a-js's verification of `card`, with keys from the registry's JWKS only (never a `jku`). */
export async function verifiesWithA2a(baseUrl: string, card: Card): Promise<boolean> {
  const keys = await jwksKeys(baseUrl);
  const verify = verifyAgentCardSignature(async (kid) => {
    const jwk = keys.find((k) => k.kid === kid);
    if (jwk === undefined) throw new Error(`no key ${kid} in the registry's JWKS`);
    return jwk;
  });
  // a2a-js logs each signature that fails to console.debug: a test that expects a failure would print it.
  const debug = console.debug;
  console.debug = () => {};
  try {
    await verify(card as never);
    return true;
  } catch {
    return false;
  } finally {
    console.debug = debug;
  }
}
