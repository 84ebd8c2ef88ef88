/**
 * The registry's signature on the agent cards it serves (issue 43, item 1): a JWS (A2A v1.0 §8.4.2) by the key
 * the schedule names at that moment, over the card's canonical bytes (domain/card-payload.ts), with the payload
 * detached. A signature is made once per card revision and key, not per request: a bounded cache keyed by the
 * tenant, the card's ETag (which names its id, revision and format) and the key id holds them. Each replica
 * signs once on its own: ES256 signatures are randomized, so two replicas serve different, equally valid ones.
 */
import { create } from "@bufbuild/protobuf";
import { FlattenedSign, importJWK, type JWK } from "jose";
import { type AgentCard, type AgentCardSignature, AgentCardSignatureSchema } from "../../gen/asor/v1/agent_card_pb.js";
import { type KeyStore, loadOrCreateKey } from "../auth/local-issuer.js";
import {
  type CardKey,
  type CardKeySchedule,
  cardKeySchedule,
  type PublishedCardKeys,
  parseCardKeys,
} from "../domain/card-keys.js";
import { agentCardPayload } from "../domain/card-payload.js";

/** The signatures the cache holds at most: about 300 bytes each. */
export const CARD_SIGNATURE_CACHE_ENTRIES = 10_000;

/** The JWS protected header the registry signs with: A2A's MUSTs (`alg`, `kid`), the `typ` a2a-js requires. */
export interface CardSignatureHeader {
  readonly alg: string;
  readonly typ: "JOSE";
  readonly kid: string;
  /** When the signature was made (NumericDate, seconds). */
  readonly iat?: number;
}

/** `payload` signed with `key` under `header`: the members of an A2A `AgentCardSignature`. */
export async function signPayload(
  key: CryptoKey | Uint8Array,
  header: CardSignatureHeader,
  payload: Uint8Array,
): Promise<{ protected: string; signature: string }> {
  const jws = await new FlattenedSign(payload).setProtectedHeader({ ...header }).sign(key);
  return { protected: jws.protected ?? "", signature: jws.signature };
}

/** The registry's card signer, and the public keys a verifier checks its signatures with. */
export interface CardSigner {
  /**
   * `card` (the caller's, freshly rendered) with the registry's signature appended to its `signatures`;
   * `cacheKey` names the card's revision (its tenant and ETag): a second call with it and the same signing key
   * reuses the signature, at once.
   */
  sign(cacheKey: string, card: AgentCard): AgentCard | Promise<AgentCard>;
  /** The keys published now, and how long that set stays as it is. */
  readonly published: PublishedCardKeys;
}

export interface CardSignerOptions {
  /** How long a retired key stays published (CARD_SIGNING_KEY_OVERLAP_SECONDS, in ms). */
  readonly overlapMs: number;
  /** The clock (ms); default Date.now. */
  readonly now?: () => number;
  readonly cacheEntries?: number;
}

/** A signer over `keys` (parsed and sorted: domain/card-keys.ts). */
export async function createCardSigner(keys: readonly CardKey[], options: CardSignerOptions): Promise<CardSigner> {
  const now = options.now ?? Date.now;
  const schedule: CardKeySchedule = cardKeySchedule(keys, options.overlapMs);
  const imported = new Map<string, CryptoKey | Uint8Array>();
  for (const key of keys) imported.set(key.kid, await importJWK(key.privateJwk as JWK, key.alg));
  const cache = createSignatureCache(options.cacheEntries ?? CARD_SIGNATURE_CACHE_ENTRIES);
  return {
    sign(cacheKey, card) {
      const nowMs = now();
      const key = schedule.signerAt(nowMs);
      if (key === undefined) throw new Error("No card signing key is active yet (every key's nbf is later).");
      const signature = cache.get(`${cacheKey}\u0000${key.kid}`, async () => {
        const header = { alg: key.alg, typ: "JOSE", kid: key.kid, iat: Math.floor(nowMs / 1000) } as const;
        const made = await signPayload(imported.get(key.kid) as CryptoKey, header, agentCardPayload(card));
        return create(AgentCardSignatureSchema, made);
      });
      // A signature made before is at hand: no promise, no wait (every read of a revision but its first).
      if (!(signature instanceof Promise)) {
        card.signatures.push(signature);
        return card;
      }
      return signature.then((made) => {
        card.signatures.push(made);
        return card;
      });
    },
    published() {
      const nowMs = now();
      const next = schedule.nextChangeMs(nowMs);
      return { keys: schedule.publishedAt(nowMs), validForMs: next === undefined ? undefined : next - nowMs };
    },
  };
}

/**
 * A P-256 key made for this process alone, kept in memory: the keys of an app made without the entrypoint's
 * (src/main/card-signing-key-files.ts), as tools and tests in-process make it. Its cards verify while it runs.
 */
export async function generatedCardKeys(): Promise<CardKey[]> {
  let kept: string | undefined;
  const memory: KeyStore = {
    readKey: async () => kept,
    writeKey: async (jwk) => {
      kept = jwk;
    },
  };
  return parseCardKeys([{ jwk: await loadOrCreateKey(memory, "card signing key"), location: "memory" }]).keys;
}

/**
 * A bounded map of signatures made or being made: the oldest used goes when it is full. A signing in progress is
 * a promise the reads of its revision share; once made, the signature itself. A failed signing is forgotten, so
 * the next request tries again.
 */
function createSignatureCache(maxEntries: number) {
  type Entry = AgentCardSignature | Promise<AgentCardSignature>;
  const entries = new Map<string, Entry>();
  return {
    get(key: string, make: () => Promise<AgentCardSignature>): Entry {
      const held = entries.get(key);
      if (held !== undefined) {
        // Used again: the newest in the map's order, the last to go.
        entries.delete(key);
        entries.set(key, held);
        return held;
      }
      const made = make();
      entries.set(key, made);
      made.then(
        (signature) => {
          if (entries.get(key) === made) entries.set(key, signature);
        },
        () => {
          if (entries.get(key) === made) entries.delete(key);
        },
      );
      if (entries.size > maxEntries) entries.delete(entries.keys().next().value as string);
      return made;
    },
  };
}
