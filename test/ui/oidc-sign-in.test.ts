// The catalog signing in with AUTH_ISSUER, in a real browser: OpenID Connect authorization code + PKCE against
// a real provider on loopback (oidc-provider, its own login and consent pages), then the list, which follows the
// token's tenant and domains as the API does. The token never appears in an address or in the browser's storage.
// When it expires the page says so, and signing in again goes through the provider's session (no login) back to
// the same page.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromiumAvailable, launchChromium, screenshot, seriousViolations, watchConsole } from "../support/browser.js";
import { startOidcProvider, type TestIssuer } from "../support/oidc-provider.js";
import { type ServerProcess, spawnServer } from "../support/server-process.js";
import { buildCatalog } from "./build-catalog.js";
import { filler, invoiceV1 } from "./seed.js";

describe.skipIf(!chromiumAvailable())("the catalog signing in at an OpenID provider", () => {
  let issuer: TestIssuer;
  let dir: string;
  let server: ServerProcess;
  let browser: Browser;

  beforeAll(async () => {
    await buildCatalog();
    const writer = { clientId: "seeder", clientSecret: "seeder-secret", tenant: "default", domains: ["Development"] };
    issuer = await startOidcProvider([writer], {
      clientId: "catalog",
      redirectPath: "/ui/callback",
      accounts: { alice: { tenant: "default", domains: ["Development", "Setup: Agents"] } },
    });
    dir = await mkdtemp(join(tmpdir(), "asor-catalog-oidc-"));
    server = await spawnServer({
      DATA_DIR: dir,
      DATABASE_URL: "",
      HOST: "127.0.0.1",
      AUTH_ISSUER: issuer.issuer,
      AUTH_ALLOW_HTTP_ISSUER: "true",
      UI_OIDC_CLIENT_ID: "catalog",
      UI_OIDC_SCOPE: "openid asor.read",
    });
    const token = await issuer.token(writer);
    for (const definition of [filler(1), invoiceV1()]) {
      const response = await fetch(`${server.baseUrl}/asor/v1/agentDefinition`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(definition),
      });
      expect(response.status).toBe(201);
    }
    browser = await launchChromium();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await issuer?.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it("signs in with code + PKCE at the issuer, returns to the page asked for, lists the tenant's agents", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const watch = watchConsole(page);
    const addresses: string[] = [];
    page.on("request", (request) => addresses.push(request.url()));
    await page.goto(`${server.baseUrl}/ui/agents?provider=Provider%3DGlobex`);
    expect(await seriousViolations(page)).toEqual([]);
    await page.getByRole("button", { name: "Sign in" }).click();

    // The provider's own pages: any login name, then consent.
    await page.waitForURL((url) => url.origin === issuer.issuer);
    const authorize = addresses.find((a) => new URL(a).pathname === "/auth");
    expect(authorize).toBeDefined();
    const query = new URL(authorize as string).searchParams;
    expect(query.get("response_type")).toBe("code");
    expect(query.get("code_challenge_method")).toBe("S256");
    expect(query.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(query.get("redirect_uri")).toBe(`${server.baseUrl}/ui/callback`);
    await page.locator('input[name="login"]').fill("alice");
    await page.locator('input[name="password"]').fill("any");
    await page.locator('button[type="submit"]').click();
    await page.getByRole("button", { name: "Continue" }).click();

    await page.waitForURL((url) => url.origin === server.baseUrl && url.pathname === "/ui/agents");
    // Errors the provider's own pages logged (they ask for a web font this machine cannot reach) are not ours.
    watch.errors.length = 0;
    await expect.poll(() => page.locator("#total").textContent()).toBe("1 agent");
    expect(page.url()).toBe(`${server.baseUrl}/ui/agents?provider=Provider%3DGlobex`);
    expect(await page.getByText("alice · tenant default").count()).toBe(1);
    await page.getByRole("link", { name: "Invoice Agent" }).click();
    await page.getByRole("region", { name: "Skill Bill a customer" }).getByText("Invoice=Create").waitFor();
    await screenshot(page, "oidc-agent");

    // The token: in no address the browser went to, and in none of its storage.
    const token = await page.evaluate(() => ({ local: localStorage.length, session: sessionStorage.length }));
    expect(token).toEqual({ local: 0, session: 0 });
    const tokenRequest = addresses.filter((a) => new URL(a).pathname === "/token");
    expect(tokenRequest).toHaveLength(1);
    for (const address of addresses) expect(address).not.toMatch(/access_token|eyJ/);
    expect(watch.errors).toEqual([]);
    await context.close();
  });

  it("says so when the token expires; Sign in goes through the issuer's session: no login, same page", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const watch = watchConsole(page);
    await page.clock.install();
    const list = `${server.baseUrl}/ui/agents?provider=Provider%3DGlobex`;
    await page.goto(list);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL((url) => url.origin === issuer.issuer);
    await page.locator('input[name="login"]').fill("alice");
    await page.locator('input[name="password"]').fill("any");
    await page.locator('button[type="submit"]').click();
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL((url) => url.href === list);
    watch.errors.length = 0; // the provider's own pages' (a web font this machine cannot reach)
    await expect.poll(() => page.locator("#total").textContent()).toBe("1 agent");

    // The access token lives 600 s (the provider's setting): the page's clock passes it.
    await page.clock.runFor(601_000);
    await page.getByText("Your session has expired: sign in again.").waitFor();
    expect(await page.locator("table.agents").count()).toBe(0);
    expect(await seriousViolations(page)).toEqual([]);
    await screenshot(page, "oidc-expired");
    // The issuer's clock did not move: back to the real time, as it would be after ten idle minutes.
    await page.clock.setSystemTime(Date.now());
    expect(watch.errors).toEqual([]);
    await page.getByRole("button", { name: "Sign in" }).click();
    // The issuer knows alice (its session): no login this time; this provider asks her to confirm the grant.
    await page.waitForURL((url) => url.origin === issuer.issuer);
    await page.getByRole("button", { name: "Continue" }).waitFor();
    expect(await page.locator('input[name="password"]').count()).toBe(0);
    await page.getByRole("button", { name: "Continue" }).click();
    await page.waitForURL((url) => url.href === list);
    watch.errors.length = 0; // the provider's page's, as above
    await expect.poll(() => page.locator("#total").textContent()).toBe("1 agent");
    expect(watch.errors).toEqual([]);
    await context.close();
  });
});
