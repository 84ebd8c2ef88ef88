import { generateKeyPairSync } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { exportJWK, generateKeyPair } from "jose";
import { describe, expect, it } from "vitest";
import { JsonWebKeySchema } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { checkProviderKeys } from "../../src/domain/jwks.js";

/** A fresh key pair's public JWK with `kid` and `alg`, as the contract's message. */
async function publicJwk(alg: "ES256" | "EdDSA" | "RS256" | "PS256", kid: string) {
  const { publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(publicKey);
  return create(JsonWebKeySchema, { ...(jwk as Record<string, string>), kid, alg });
}

const paths = async (keys: Parameters<typeof checkProviderKeys>[0]) => {
  const checked = await checkProviderKeys(keys);
  return checked.issues?.map((i) => `${i.code} ${i.path}`) ?? [];
};

describe("checkProviderKeys", () => {
  it("accepts EC P-256/ES256, OKP Ed25519/EdDSA and RSA 2048/RS256, holding each as sorted public JSON", async () => {
    const keys = [await publicJwk("ES256", "ec"), await publicJwk("EdDSA", "ed"), await publicJwk("RS256", "rsa")];
    const checked = await checkProviderKeys(keys);
    expect(checked.issues).toBeUndefined();
    expect(checked.keys?.map((k) => [k.kid, k.alg])).toEqual([
      ["ec", "ES256"],
      ["ed", "EdDSA"],
      ["rsa", "RS256"],
    ]);
    const ed = JSON.parse(checked.keys?.[1]?.jwk ?? "{}");
    expect(Object.keys(ed)).toEqual(["alg", "crv", "kid", "kty", "use", "x"]);
    expect(ed).toMatchObject({ kty: "OKP", crv: "Ed25519", use: "sig" });
  });

  it("refuses oct, none and HMAC, naming each key's member", async () => {
    const ed = await publicJwk("EdDSA", "a");
    const oct = create(JsonWebKeySchema, { kty: "oct", kid: "b", alg: "HS256" });
    const none = create(JsonWebKeySchema, { ...ed, kid: "c", alg: "none" });
    const hs = create(JsonWebKeySchema, { ...ed, kid: "d", alg: "HS256" });
    expect(await paths([ed, oct, none, hs])).toEqual([
      "NOT_ALLOWED keys[1].kty",
      "NOT_ALLOWED keys[2].alg",
      "NOT_ALLOWED keys[3].alg",
    ]);
  });

  it("refuses a kid twice, a kid with a control character, a use other than sig, a wrong curve", async () => {
    const a = await publicJwk("EdDSA", "same");
    const b = await publicJwk("ES256", "same");
    const c = create(JsonWebKeySchema, { ...(await publicJwk("EdDSA", "x")), kid: "bad\u0007kid", use: "enc" });
    const d = create(JsonWebKeySchema, { ...(await publicJwk("ES256", "y")), crv: "P-384" });
    expect(await paths([a, b, c, d])).toEqual([
      "DUPLICATE_KID keys[1].kid",
      "INVALID_CHARACTER keys[2].kid",
      "NOT_ALLOWED keys[2].use",
      "NOT_ALLOWED keys[3].crv",
    ]);
  });

  it("refuses members of another key type, missing ones, a short RSA modulus and a point off the curve", async () => {
    const ec = await publicJwk("ES256", "ec");
    const missingY = create(JsonWebKeySchema, { ...ec, kid: "no-y", y: undefined });
    const withN = create(JsonWebKeySchema, { ...(await publicJwk("EdDSA", "ed")), n: "AQAB" });
    // jose makes no RSA key under 2048 bits; node:crypto does.
    const small = generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ format: "jwk" });
    const short = create(JsonWebKeySchema, { ...(small as Record<string, string>), kid: "short", alg: "RS256" });
    const offCurve = create(JsonWebKeySchema, { ...ec, kid: "off", y: ec.x });
    expect(await paths([missingY, withN, short, offCurve])).toEqual([
      "REQUIRED keys[0].y",
      "INVALID_VALUE keys[1].n",
      "OUT_OF_RANGE keys[2].n",
      "MALFORMED_KEY keys[3]",
    ]);
  });
});
