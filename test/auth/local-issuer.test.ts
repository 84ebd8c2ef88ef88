// The embedded default: with no AUTH_ISSUER the service trusts a local
// development issuer whose ES256 key lives in DATA_DIR; `npm run token`
// signs with it, and its tokens pass the same JWT verification as any other.
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { type CryptoKey, importJWK, type JWK } from "jose";
import { afterEach, describe, expect, it } from "vitest";
import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { AuthSetupError } from "../../src/auth/auth-errors.js";
import { createAuthenticator } from "../../src/auth/authenticator.js";
import { LOCAL_ISSUER, openLocalIssuer } from "../../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import { npmScriptCommand } from "../support/npm-script.js";
import { newKey, now, rejection, shown, sign, tamper } from "./forge.js";

const run = promisify(execFile);
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});
async function dataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "asor-auth-"));
  dirs.push(dir);
  return dir;
}

const { config } = parseAuthConfig({});
const claimNames = { audience: config.audience, tenantClaim: config.tenantClaim, domainsClaim: config.domainsClaim };

describe("the local development issuer", () => {
  it("is the mode when AUTH_ISSUER is unset, and says so with the key's location", async () => {
    const dir = await dataDir();
    const authenticator = await createAuthenticator(config, { keyStore: localIssuerKeyFile(dir) });
    expect(authenticator.description).toBe(
      `local development issuer (key in ${join(dir, "dev-issuer.jwk")}); ` +
        'get a token with npm run token -- --tenant <tenant> --domains "Development,Setup: Agents"',
    );
  });

  it("makes an ES256 private key on first start, readable by its owner only, and reuses it afterwards", async () => {
    const dir = await dataDir();
    const first = await openLocalIssuer(localIssuerKeyFile(dir), claimNames);
    const file = join(dir, "dev-issuer.jwk");
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const stored = JSON.parse(await readFile(file, "utf8")) as Record<string, unknown>;
    expect(stored).toMatchObject({ kty: "EC", crv: "P-256", alg: "ES256" });
    expect(typeof stored.d).toBe("string");
    const second = await openLocalIssuer(localIssuerKeyFile(dir), claimNames);
    expect(second.jwks).toEqual(first.jwks);
    expect(first.jwks.keys[0]).not.toHaveProperty("d");
  });

  it("accepts its own tokens after a restart (the key persists), mapping tenant and domains", async () => {
    const dir = await dataDir();
    const issuer = await openLocalIssuer(localIssuerKeyFile(dir), claimNames);
    const token = await issuer.issue({ tenant: "default", domains: ["Development", "Setup: Agents"] });
    const restarted = await createAuthenticator(config, { keyStore: localIssuerKeyFile(dir) });
    const principal = await restarted.authenticate(`Bearer ${token}`);
    expect(principal).toMatchObject({ subject: "developer", tenant: "default" });
    expect([...principal.domains]).toEqual(["Development", "Setup: Agents"]);
  });

  it("still refuses requests without a token", async () => {
    const authenticator = await createAuthenticator(config, { keyStore: localIssuerKeyFile(await dataDir()) });
    const error = await rejection(authenticator.authenticate(null));
    expect(error).toMatchObject({ code: "UNAUTHENTICATED", message: "No bearer token was sent." });
  });

  it("refuses a token from another data directory's key, an expired one and a tampered one", async () => {
    const dir = await dataDir();
    const authenticator = await createAuthenticator(config, { keyStore: localIssuerKeyFile(dir) });
    const other = await openLocalIssuer(localIssuerKeyFile(await dataDir()), claimNames);
    const own = await openLocalIssuer(localIssuerKeyFile(dir), claimNames);
    const { privateKey } = await newKey();
    const cases: [string, RegExp][] = [
      [await other.issue({ tenant: "default" }), /key the issuer has not published/],
      [
        await sign(privateKey, undefined, { iss: LOCAL_ISSUER, aud: "asor", sub: "x", exp: now() + 60 }),
        /signature is not valid/,
      ],
      [tamper(await own.issue({ tenant: "default" }), (c) => (c.tenant = "other")), /signature is not valid/],
    ];
    for (const [token, message] of cases) {
      const error = await rejection(authenticator.authenticate(`Bearer ${token}`));
      expect(error.message).toMatch(message);
      expect(shown(error)).not.toContain(token);
    }
  });

  it("refuses a token signed with its own key once expired, and one for another audience", async () => {
    const dir = await dataDir();
    const authenticator = await createAuthenticator(config, { keyStore: localIssuerKeyFile(dir) });
    const stored = JSON.parse(await readFile(join(dir, "dev-issuer.jwk"), "utf8")) as JWK;
    const key = (await importJWK(stored, "ES256")) as CryptoKey;
    const base = { iss: LOCAL_ISSUER, aud: "asor", sub: "developer", tenant: "default", iat: now() - 900 };
    const expired = await sign(key, stored.kid, { ...base, exp: now() - 120 });
    expect((await rejection(authenticator.authenticate(`Bearer ${expired}`))).message).toBe(
      "The bearer token has expired.",
    );
    const elsewhere = await sign(key, stored.kid, { ...base, aud: "another-service", exp: now() + 60 });
    expect((await rejection(authenticator.authenticate(`Bearer ${elsewhere}`))).message).toMatch(/wrong audience/);
  });

  it("fails to start, naming the file, when the stored key is not an ES256 private JWK", async () => {
    const dir = await dataDir();
    await writeFile(join(dir, "dev-issuer.jwk"), '{"kty":"oct","k":"c2VjcmV0"}');
    const failure = await createAuthenticator(config, { keyStore: localIssuerKeyFile(dir) }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(AuthSetupError);
    expect((failure as AuthSetupError).code).toBe("AUTH_LOCAL_KEY");
    expect((failure as Error).message).toContain(join(dir, "dev-issuer.jwk"));
  });

  it("needs a key store when no issuer is configured", async () => {
    await expect(createAuthenticator(config, {})).rejects.toMatchObject({ code: "AUTH_LOCAL_KEY" });
  });
});

describe("npm run token", () => {
  const env = (dir: string): NodeJS.ProcessEnv => {
    const clean = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith("AUTH_") && k !== "DATA_DIR"),
    );
    return { ...clean, DATA_DIR: dir };
  };
  /** `npm run token -- <args>` as the script runs it, without npm (the compiled dist/). */
  const token = async (args: string[], options: { env: NodeJS.ProcessEnv }) => {
    const [node, ...script] = await npmScriptCommand("token");
    return run(node, [...script, ...args], options);
  };

  it("prints a token (and only the token) that the service accepts", async () => {
    const dir = await dataDir();
    const { stdout } = await run(
      "npm",
      ["run", "-s", "token", "--", "--tenant", "default", "--domains", "Development,Setup: Agents"],
      { env: env(dir) },
    );
    const token = stdout.trim();
    expect(token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    const authenticator = await createAuthenticator(config, { keyStore: localIssuerKeyFile(dir) });
    const principal = await authenticator.authenticate(`Bearer ${token}`);
    expect(principal).toMatchObject({ subject: "developer", tenant: "default" });
    expect([...principal.domains]).toEqual(["Development", "Setup: Agents"]);
  });

  it("honours --ttl and --subject", async () => {
    const dir = await dataDir();
    const { stdout } = await token(["--subject", "ci-bot", "--ttl", "120", "--tenant", "t1"], { env: env(dir) });
    const [, payload] = stdout.trim().split(".");
    const claims = JSON.parse(Buffer.from(payload ?? "", "base64url").toString()) as {
      sub: string;
      exp: number;
      iat: number;
      domains: string[];
    };
    expect(claims).toMatchObject({ sub: "ci-bot", domains: [] });
    expect(claims.exp - claims.iat).toBe(120);
  });

  it(
    "prints no token longer-lived than the service accepts (AUTH_MAX_TOKEN_LIFETIME_SECONDS, 24 h by " + "default)",
    async () => {
      const dir = await dataDir();
      const tooLong = await token(["--tenant", "t1", "--ttl", "86401"], {
        env: env(dir),
      }).catch((e: unknown) => e as { code: number; stderr: string; stdout: string });
      expect(tooLong).toMatchObject({ code: 2, stdout: "" });
      expect((tooLong as { stderr: string }).stderr).toContain("from 1 to 86400 (AUTH_MAX_TOKEN_LIFETIME_SECONDS)");
      const { stdout } = await token(["--tenant", "t1", "--ttl", "7200"], {
        env: { ...env(dir), AUTH_MAX_TOKEN_LIFETIME_SECONDS: "7200" },
      });
      const [, payload] = stdout.trim().split(".");
      const claims = JSON.parse(Buffer.from(payload ?? "", "base64url").toString()) as { exp: number; iat: number };
      expect(claims.exp - claims.iat).toBe(7200);
    },
  );

  it("sets the platform admin claim with --platform-admin", async () => {
    const dir = await dataDir();
    const { stdout } = await token(["--tenant", "t1", "--platform-admin"], {
      env: env(dir),
    });
    const authenticator = await createAuthenticator(config, { keyStore: localIssuerKeyFile(dir) });
    expect(await authenticator.authenticate(`Bearer ${stdout.trim()}`)).toMatchObject({
      tenant: "t1",
      platformAdmin: true,
    });
  });

  it("prints a platform operator's token without --tenant: no tenant claim, the platform admin claim set", async () => {
    const dir = await dataDir();
    const { stdout } = await token(["--domains", "Setup: Tenants"], {
      env: env(dir),
    });
    const authenticator = await createAuthenticator(config, { keyStore: localIssuerKeyFile(dir) });
    expect(await authenticator.authenticate(`Bearer ${stdout.trim()}`)).toMatchObject({
      tenant: null,
      platformAdmin: true,
    });
  });

  it("refuses to run when AUTH_ISSUER points at a real issuer", async () => {
    const dir = await dataDir();
    const failure = await token(["--tenant", "default"], {
      env: { ...env(dir), AUTH_ISSUER: "https://issuer.example" },
    }).catch((e: unknown) => e as { code: number; stderr: string; stdout: string });
    expect(failure).toMatchObject({ code: 1, stdout: "" });
    expect((failure as { stderr: string }).stderr).toContain("AUTH_ISSUER is set");
  });
});
