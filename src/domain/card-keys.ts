/**
 * The registry's card signing keys and their schedule (issue 43, item 1). Pure: the keys are private JWKs read
 * by the entrypoint (CARD_SIGNING_KEY_FILE, CARD_SIGNING_KEYS_DIR, or the key made in DATA_DIR); this says
 * which of them signs at a moment and which the JWKS publishes then.
 *
 * Each key may carry `nbf` (a NumericDate, seconds): it signs from then on, until the next key's `nbf`; a key
 * without one is active from the start. A key is published from the start (so verifiers that cache the JWKS
 * know a key before it signs) until its successor's activation plus the overlap (CARD_SIGNING_KEY_OVERLAP_SECONDS):
 * a card signed just before the rotation still verifies for that long, and then the key is gone.
 */

/** The algorithms the registry signs with: ES256 (P-256, the default) and EdDSA (Ed25519). */
export type CardSigningAlg = "ES256" | "EdDSA";

/** A private JWK's members, as parsed JSON. */
export type Jwk = Readonly<Record<string, unknown>>;

/** One card signing key: what it is, when it signs from, its private and public JWKs. */
export interface CardKey {
  readonly kid: string;
  readonly alg: CardSigningAlg;
  /** When it starts to sign (`nbf`, in ms); 0 for a key without `nbf`. */
  readonly activeFromMs: number;
  readonly privateJwk: Jwk;
  /** The public members, as the JWKS serves them: `kty`, `crv`, `x` (`y`), `kid`, `alg`, `use: "sig"`. */
  readonly publicJwk: Jwk;
}

/** A private JWK read from a file, and where it was read (for the errors). */
export interface KeySource {
  readonly jwk: unknown;
  readonly location: string;
}

const CURVES: Readonly<Record<CardSigningAlg, { kty: string; crv: string; members: readonly string[] }>> = {
  ES256: { kty: "EC", crv: "P-256", members: ["x", "y", "d"] },
  EdDSA: { kty: "OKP", crv: "Ed25519", members: ["x", "d"] },
};

/** The keys of `sources`, or every problem with them (each naming its file and member). */
export function parseCardKeys(sources: readonly KeySource[]): { keys: CardKey[]; problems: string[] } {
  const problems: string[] = [];
  const keys: CardKey[] = [];
  for (const { jwk, location } of sources) {
    const key = parseCardKey(jwk, (what) => problems.push(`card signing key ${location}: ${what}`));
    if (key !== undefined) keys.push(key);
  }
  const kids = new Set<string>();
  const activations = new Set<number>();
  for (const key of keys) {
    if (kids.has(key.kid)) problems.push(`card signing keys: two keys have the kid "${key.kid}"`);
    if (activations.has(key.activeFromMs))
      problems.push(`card signing keys: two keys become active at once (nbf ${key.activeFromMs / 1000})`);
    kids.add(key.kid);
    activations.add(key.activeFromMs);
  }
  if (sources.length === 0) problems.push("card signing keys: there is none");
  return { keys: keys.sort((a, b) => a.activeFromMs - b.activeFromMs), problems };
}

function parseCardKey(value: unknown, problem: (what: string) => void): CardKey | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    problem("is not a JSON object (a private JWK)");
    return undefined;
  }
  const jwk = value as Jwk;
  const alg = jwk.alg ?? (jwk.kty === "OKP" ? "EdDSA" : "ES256");
  if (alg !== "ES256" && alg !== "EdDSA") {
    problem(`alg "${String(alg)}" is not ES256 or EdDSA`);
    return undefined;
  }
  const curve = CURVES[alg];
  const missing = ["kid", ...curve.members].filter((m) => typeof jwk[m] !== "string" || jwk[m] === "");
  if (jwk.kty !== curve.kty || jwk.crv !== curve.crv)
    problem(`an ${alg} key is kty "${curve.kty}", crv "${curve.crv}"`);
  else if (missing.length > 0) problem(`has no ${missing.join(", ")} (a private ${alg} JWK has them all)`);
  else if (jwk.nbf !== undefined && (typeof jwk.nbf !== "number" || !Number.isFinite(jwk.nbf) || jwk.nbf < 0))
    problem("nbf must be a NumericDate (seconds since 1970)");
  else {
    const publicJwk: Record<string, unknown> = { kty: curve.kty, crv: curve.crv, x: jwk.x };
    if (jwk.y !== undefined) publicJwk.y = jwk.y;
    Object.assign(publicJwk, { kid: jwk.kid, alg, use: "sig" });
    const activeFromMs = typeof jwk.nbf === "number" ? jwk.nbf * 1000 : 0;
    return { kid: jwk.kid as string, alg, activeFromMs, privateJwk: jwk, publicJwk };
  }
  return undefined;
}

/** The keys published now (the JWKS), and how long that set stays as it is (ms; undefined: until a restart). */
export type PublishedCardKeys = () => { readonly keys: readonly CardKey[]; readonly validForMs: number | undefined };

/** Which key signs at a moment, and which keys are published then. */
export interface CardKeySchedule {
  /** The newest key active at `nowMs`; undefined before the first is. */
  signerAt(nowMs: number): CardKey | undefined;
  /** The keys the JWKS publishes at `nowMs`, oldest first. */
  publishedAt(nowMs: number): readonly CardKey[];
  /** When the published set next changes after `nowMs` (a retired key's overlap ends); undefined: never. */
  nextChangeMs(nowMs: number): number | undefined;
}

/** The schedule of `keys` (sorted by activation, as parseCardKeys gives them), each retired key kept `overlapMs`. */
export function cardKeySchedule(keys: readonly CardKey[], overlapMs: number): CardKeySchedule {
  // Each key's end: its successor's activation plus the overlap; the newest never ends.
  const ends = keys.map((_, i) => {
    const next = keys[i + 1];
    return next === undefined ? Number.POSITIVE_INFINITY : next.activeFromMs + overlapMs;
  });
  return {
    signerAt: (nowMs) => keys.findLast((key) => key.activeFromMs <= nowMs),
    publishedAt: (nowMs) => keys.filter((_, i) => nowMs < (ends[i] ?? 0)),
    nextChangeMs(nowMs) {
      const later = ends.filter((end) => end > nowMs && end !== Number.POSITIVE_INFINITY);
      return later.length === 0 ? undefined : Math.min(...later);
    },
  };
}
