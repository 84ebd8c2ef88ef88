// The catalog as the registry serves it, under Node and Deno, on the embedded default (SQLite, the local
// development issuer): its files with their caching and Content-Security-Policy, the redirect of a browser's `/`,
// how it signs in (`/ui/config.json`), and the development sign-in (`/ui/dev-token`) with its guards. And with
// AUTH_ISSUER (a real OpenID provider on loopback): no development sign-in, the issuer in the policy.
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startOidcProvider, type TestIssuer } from "../support/oidc-provider.js";
import { RUNTIMES, type ServerProcess, spawnServer } from "../support/server-process.js";
import { buildCatalog } from "../ui/build-catalog.js";

const CLEARED = { AUTH_ISSUER: "", DATABASE_URL: "", HOST: "127.0.0.1", UI_OIDC_CLIENT_ID: "" };

beforeAll(() => buildCatalog(), 180_000);

describe.each(RUNTIMES)("the catalog under %s", (runtime) => {
  let dir: string;
  let server: ServerProcess;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "asor-catalog-e2e-"));
    server = await spawnServer({ ...CLEARED, DATA_DIR: dir }, runtime);
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });
  const get = (path: string, headers: Record<string, string> = {}) =>
    fetch(`${server.baseUrl}${path}`, { headers, redirect: "manual" });

  it("serves index.html at /ui/ and at the app's routes: no-cache, an ETag, the policy, no inline script", async () => {
    const index = await get("/ui/");
    expect(index.status).toBe(200);
    expect(index.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(index.headers.get("cache-control")).toBe("no-cache");
    const csp = index.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("script-src 'self';");
    expect(csp).toContain("connect-src 'self';");
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
    expect(index.headers.get("x-content-type-options")).toBe("nosniff");
    const html = await index.text();
    const scripts = [...html.matchAll(/<script\b[^>]*>/g)].map((m) => m[0]);
    expect(scripts.length).toBeGreaterThan(0);
    for (const tag of scripts) expect(tag).toMatch(/ src="\/ui\/assets\/[^"]+\.js"/);
    expect(html).not.toMatch(/<style\b|\sstyle=|\son[a-z]+=/i);

    const route = await get("/ui/agents/0123456789abcdef0123456789abcdef");
    expect(route.status).toBe(200);
    expect(await route.text()).toBe(html);
    const etag = index.headers.get("etag") ?? "";
    expect(etag).toMatch(/^"[0-9a-f]{32}"$/);
    const again = await get("/ui/", { "if-none-match": etag });
    expect(again.status).toBe(304);
  });

  it("serves the content-hashed assets immutable, and answers 404 for a file it does not have", async () => {
    const names = await readdir(join(import.meta.dirname, "..", "..", "dist", "ui", "assets"));
    const script = names.find((n) => n.endsWith(".js"));
    expect(script).toMatch(/^index-[A-Za-z0-9_-]{8}\.js$/);
    const asset = await get(`/ui/assets/${script}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(asset.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect((await get("/ui/assets/index-nothere.js")).status).toBe(404);
    expect((await fetch(`${server.baseUrl}/ui/`, { method: "POST" })).status).toBe(405);
  });

  it("redirects a browser's / to /ui/, and /ui to /ui/; an API client's / stays a 404", async () => {
    const browser = await get("/", { accept: "text/html,application/xhtml+xml,*/*;q=0.8" });
    expect(browser.status).toBe(302);
    expect(browser.headers.get("location")).toBe("/ui/");
    const bare = await get("/ui");
    expect(bare.status).toBe(301);
    expect(bare.headers.get("location")).toBe("/ui/");
    const client = await get("/", { accept: "application/json" });
    expect(client.status).toBe(404);
    expect((await client.json()).errors[0].code).toBe("NOT_FOUND");
  });

  it("signs in with the local issuer: a token for the tenant and domains asked, that the API takes", async () => {
    expect(await (await get("/ui/config.json")).json()).toEqual({ signIn: { kind: "local" } });
    const answer = await fetch(`${server.baseUrl}/ui/dev-token`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ tenant: "default", domains: ["Development"] }),
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get("cache-control")).toBe("no-store");
    const body = (await answer.json()) as { access_token: string; token_type: string; expires_in: number };
    expect(body.token_type).toBe("Bearer");
    expect(body.expires_in).toBe(3600);
    const claims = JSON.parse(Buffer.from(body.access_token.split(".")[1] ?? "", "base64url").toString());
    expect(claims).toMatchObject({ tenant: "default", domains: ["Development"], sub: "catalog" });
    expect(claims.platform_admin).toBeUndefined();
    const auth = { authorization: `Bearer ${body.access_token}` };
    expect((await get("/asor/v1/agentDefinition", auth)).status).toBe(200);
    // Development alone: the list, not a definition by id (Setup: Agents), as with any token.
    expect((await get("/asor/v1/agentDefinition/0123456789abcdef0123456789abcdef", auth)).status).toBe(403);
  });

  it("refuses a development sign-in that is not JSON, names another Host, or asks for no tenant", async () => {
    const post = (headers: Record<string, string>, body: string) =>
      fetch(`${server.baseUrl}/ui/dev-token`, { method: "POST", headers, body });
    const form = await post({ "content-type": "application/x-www-form-urlencoded" }, "tenant=default");
    expect(form.status).toBe(415);
    const json = { "content-type": "application/json" };
    // fetch will not send another Host (a forbidden header): node:http will, as a browser does after DNS rebinding.
    const rebound = await rawPost(server.port, `attacker.example:${server.port}`, '{"tenant":"default","domains":[]}');
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.body).errors[0].code).toBe("PERMISSION_DENIED");
    const local = await rawPost(server.port, `localhost:${server.port}`, '{"tenant":"default","domains":[]}');
    expect(local.status).toBe(200);
    const bad = await post(json, '{"tenant":"not a tenant","domains":"Development"}');
    expect(bad.status).toBe(400);
    expect((await bad.json()).errors.map((e: { field: string }) => e.field)).toEqual(["tenant", "domains"]);
    expect((await get("/ui/dev-token")).status).toBe(405);
  });
});

describe("the catalog with AUTH_ISSUER", () => {
  let issuer: TestIssuer;
  let dir: string;
  let server: ServerProcess;
  beforeAll(async () => {
    issuer = await startOidcProvider([]);
    dir = await mkdtemp(join(tmpdir(), "asor-catalog-oidc-"));
    server = await spawnServer({
      ...CLEARED,
      DATA_DIR: dir,
      AUTH_ISSUER: issuer.issuer,
      AUTH_ALLOW_HTTP_ISSUER: "true",
      UI_OIDC_CLIENT_ID: "catalog",
      UI_OIDC_SCOPE: "openid asor.read",
    });
  }, 180_000);
  afterAll(async () => {
    await server?.stop();
    await issuer?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it("tells the app to sign in at the issuer, lets it call the issuer, and has no development sign-in", async () => {
    const config = await (await fetch(`${server.baseUrl}/ui/config.json`)).json();
    expect(config).toEqual({
      signIn: {
        kind: "oidc",
        issuer: `${issuer.issuer}/`,
        clientId: "catalog",
        scope: "openid asor.read",
        allowHttp: true,
      },
    });
    const index = await fetch(`${server.baseUrl}/ui/`);
    expect(index.headers.get("content-security-policy")).toContain(`connect-src 'self' ${issuer.issuer};`);
    const token = await fetch(`${server.baseUrl}/ui/dev-token`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ tenant: "default", domains: ["Development"] }),
    });
    expect(token.status).toBe(404);
  });
});

/** A JSON POST to /ui/dev-token on 127.0.0.1:`port` with the Host header `host`. */
function rawPost(port: number, host: string, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method: "POST", path: "/ui/dev-token" }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
    });
    req.setHeader("host", host);
    req.setHeader("content-type", "application/json");
    req.once("error", reject);
    req.end(body);
  });
}
