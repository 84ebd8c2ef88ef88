import { describe, expect, it } from "vitest";
import { type CardKey, cardKeySchedule, parseCardKeys } from "../../src/domain/card-keys.js";

const EC = { kty: "EC", crv: "P-256", x: "x", y: "y", d: "d" };
const OKP = { kty: "OKP", crv: "Ed25519", x: "x", d: "d" };
const key = (kid: string, activeFromMs: number) => ({ kid, activeFromMs }) as CardKey;
const kids = (keys: readonly CardKey[]) => keys.map((k) => k.kid);

describe("the card signing keys", () => {
  it("publish public members only, ES256 by default, EdDSA for an Ed25519 key", () => {
    const { keys, problems } = parseCardKeys([
      { jwk: { ...EC, kid: "p256" }, location: "a" },
      { jwk: { ...OKP, kid: "ed", nbf: 10 }, location: "b" },
    ]);
    expect(problems).toEqual([]);
    expect(keys.map((k) => k.publicJwk)).toEqual([
      { kty: "EC", crv: "P-256", x: "x", y: "y", kid: "p256", alg: "ES256", use: "sig" },
      { kty: "OKP", crv: "Ed25519", x: "x", kid: "ed", alg: "EdDSA", use: "sig" },
    ]);
    expect(keys.map((k) => k.activeFromMs)).toEqual([0, 10_000]);
  });

  it("refuse what is not a private ES256 or EdDSA key with a kid, two kids alike, two activations at once", () => {
    const { problems } = parseCardKeys([
      { jwk: { ...EC, kid: "k", alg: "RS256" }, location: "rsa" },
      { jwk: { ...EC, kid: "k", d: undefined }, location: "public" },
      { jwk: { ...EC, kid: "k", crv: "P-384" }, location: "p384" },
      { jwk: { ...EC, kid: "k", nbf: "soon" }, location: "nbf" },
      { jwk: { ...EC, kid: "k" }, location: "one" },
      { jwk: { ...OKP, kid: "k" }, location: "two" },
      { jwk: [], location: "array" },
    ]);
    expect(problems).toEqual([
      'card signing key rsa: alg "RS256" is not ES256 or EdDSA',
      "card signing key public: has no d (a private ES256 JWK has them all)",
      'card signing key p384: an ES256 key is kty "EC", crv "P-256"',
      "card signing key nbf: nbf must be a NumericDate (seconds since 1970)",
      "card signing key array: is not a JSON object (a private JWK)",
      'card signing keys: two keys have the kid "k"',
      "card signing keys: two keys become active at once (nbf 0)",
    ]);
    expect(parseCardKeys([]).problems).toEqual(["card signing keys: there is none"]);
  });

  it("sign with the newest active key; publish the next before it signs and the last until the overlap ends", () => {
    const schedule = cardKeySchedule([key("a", 0), key("b", 1_000), key("c", 5_000)], 2_000);
    expect(schedule.signerAt(999)?.kid).toBe("a");
    expect(schedule.signerAt(1_000)?.kid).toBe("b");
    expect(schedule.signerAt(9_999)?.kid).toBe("c");
    expect(kids(schedule.publishedAt(0))).toEqual(["a", "b", "c"]);
    expect(kids(schedule.publishedAt(2_999))).toEqual(["a", "b", "c"]);
    expect(kids(schedule.publishedAt(3_000))).toEqual(["b", "c"]);
    expect(kids(schedule.publishedAt(7_000))).toEqual(["c"]);
    expect(schedule.nextChangeMs(0)).toBe(3_000);
    expect(schedule.nextChangeMs(3_000)).toBe(7_000);
    expect(schedule.nextChangeMs(7_000)).toBeUndefined();
    expect(cardKeySchedule([key("later", 5_000)], 0).signerAt(0)).toBeUndefined();
  });
});
