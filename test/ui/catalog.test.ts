// The catalog in a real browser (Debian's chromium through playwright-core) against a registry process with the
// local development issuer, on the embedded default (SQLite) and on MariaDB, seeded through the REST API: sign-in,
// search, filters, paging, an agent's page with its skills' host resources, versions and their comparison, the
// lifecycle buttons and a 412, a hostile definition, what a token without `Setup: Agents` and another tenant's
// token see, an API error's message and code, the end of a session, and axe-core's check of each page. Every
// page's console is watched: an error the test did not expect (by its HTTP status) fails the test. Screenshots of
// each page go to test-artifacts/ui/<database>/, and the docs' smaller copies to test-artifacts/ui/docs/.
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parseAuthConfig } from "../../src/auth/auth-config.js";
import { type LocalIssuer, openLocalIssuer } from "../../src/auth/local-issuer.js";
import { localIssuerKeyFile } from "../../src/main/local-issuer-key-file.js";
import {
  type ConsoleWatch,
  chromiumAvailable,
  docsScreenshot,
  launchChromium,
  screenshot,
  seriousViolations,
  watchConsole,
} from "../support/browser.js";
import { type FreshDatabase, testDatabases } from "../support/databases.js";
import { type ServerProcess, spawnServer } from "../support/server-process.js";
import { buildCatalog } from "./build-catalog.js";
import { FILLERS, filler, HOSTILE, hostile, invoiceV1, invoiceV2 } from "./seed.js";

const BOTH = ["Development", "Setup: Agents"];

const withBrowser = chromiumAvailable();

for (const db of testDatabases())
  describe.skipIf(!withBrowser || db.skip)(`the catalog in a browser, on ${db.name}`, () => {
    let fresh: FreshDatabase;
    let server: ServerProcess;
    let browser: Browser;
    let issuer: LocalIssuer;
    let token: string;
    const ids: Record<string, string> = {};
    const contexts: BrowserContext[] = [];

    const api = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
      const response = await fetch(`${server.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const json = (await response.json()) as Record<string, any>;
      if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`);
      return json;
    };
    const register = async (definition: Record<string, unknown>, tenant = "default") =>
      (await api("POST", `/api/asor/v1/${tenant}/agentDefinition`, definition)).id as string;

    beforeAll(async () => {
      await buildCatalog();
      fresh = await db.create();
      server = await spawnServer({
        DATA_DIR: fresh.dataDir,
        AUTH_ISSUER: "",
        DATABASE_URL: fresh.databaseUrl ?? "",
        HOST: "127.0.0.1",
      });
      issuer = await openLocalIssuer(localIssuerKeyFile(fresh.dataDir), parseAuthConfig({}).config);
      const admin = await issuer.issue({ domains: ["Setup: Tenants"], platformAdmin: true });
      token = admin;
      await api("POST", "/asor/v1/admin/tenants", { name: "other", sequencePrefix: "OTHER-" });
      token = await issuer.issue({ tenant: "default", domains: BOTH });
      for (let n = 1; n <= FILLERS; n++) await register(filler(n));
      ids.v1 = await register(invoiceV1());
      ids.v2 = await register(invoiceV2());
      ids.hostile = await register(hostile());
      token = await issuer.issue({ tenant: "other", domains: BOTH });
      ids.other = await register({ ...filler(99), name: "Other Tenant Agent" }, "other");
      token = await issuer.issue({ tenant: "default", domains: BOTH });
      browser = await launchChromium();
    }, 180_000);

    afterAll(async () => {
      await Promise.all(contexts.map((c) => c.close()));
      await browser?.close();
      await server?.stop();
      await fresh?.cleanup();
    });

    /** The pages of the running test, each with the HTTP error statuses its console may report. */
    let watched: { watch: ConsoleWatch; statuses: readonly number[] }[] = [];
    // No console error but the browser's own report of an answer the test expects ("Failed to load resource: the
    // server responded with a status of 412 (Precondition Failed)"): every other error fails the test.
    afterEach(() => {
      const unexpected = watched.flatMap(({ watch, statuses }) =>
        watch.errors.filter((e) => !statuses.some((s) => e.includes(`the server responded with a status of ${s} (`))),
      );
      const dialogs = watched.flatMap(({ watch }) => watch.dialogs);
      watched = [];
      expect(unexpected).toEqual([]);
      expect(dialogs).toEqual([]);
    });

    /**
     * A fresh page (its own memory: no session) of `width` pixels, its console watched; `statuses` are the HTTP
     * error statuses the test expects the API to answer it (the browser logs each as a console error).
     */
    const newPage = async (
      width = 1280,
      statuses: readonly number[] = [],
    ): Promise<{ page: Page; watch: ConsoleWatch }> => {
      const context = await browser.newContext({ viewport: { width, height: 900 } });
      contexts.push(context);
      const page = await context.newPage();
      const watch = watchConsole(page);
      watched.push({ watch, statuses });
      return { page, watch };
    };
    const shot = (page: Page, name: string) => screenshot(page, `${db.name}/${name}`);

    const signIn = async (page: Page, tenant = "default", domains = BOTH) => {
      await page.getByLabel("Tenant").fill(tenant);
      for (const domain of BOTH) await page.getByLabel(domain, { exact: true }).setChecked(domains.includes(domain));
      await page.getByRole("button", { name: "Sign in" }).click();
    };

    const total = (page: Page) => page.locator("#total");
    const rows = (page: Page) => page.locator("table.agents tbody tr");

    it("redirects a browser from / to /ui/, and shows a visitor nothing but the sign-in", async () => {
      const { page, watch } = await newPage();
      const api: string[] = [];
      page.on("request", (request) => {
        if (new URL(request.url()).pathname.includes("agentDefinition")) api.push(request.url());
      });
      await page.goto(`${server.baseUrl}/`);
      expect(new URL(page.url()).pathname).toBe("/ui/");
      await page.getByRole("button", { name: "Sign in" }).waitFor();
      await page.goto(`${server.baseUrl}/ui/agents/${ids.v1}`);
      await page.getByRole("button", { name: "Sign in" }).waitFor();
      expect(await page.getByText("Invoice Agent").count()).toBe(0);
      expect(api).toEqual([]);
      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "sign-in");
      expect(watch.errors).toEqual([]);
    });

    it("signs in with the development issuer, lists, searches, filters by tag and pages", async () => {
      const { page, watch } = await newPage();
      const requests: string[] = [];
      const tokens = new Set<string>();
      page.on("request", (request) => {
        requests.push(request.url());
        const bearer = request.headers().authorization?.replace(/^Bearer /, "");
        if (bearer !== undefined) tokens.add(bearer);
      });
      await page.goto(`${server.baseUrl}/ui/`);
      await signIn(page);
      await expect.poll(() => total(page).textContent()).toBe(`${FILLERS + 3} agents`);
      expect(await rows(page).count()).toBe(20);
      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "agents");
      if (db.name === "sqlite") await docsScreenshot(page, "catalog-agents");

      await page.getByRole("button", { name: "Next page" }).click();
      await expect.poll(() => rows(page).count()).toBe(FILLERS + 3 - 20);
      await expect.poll(() => page.getByRole("button", { name: "Next page" }).count()).toBe(0);
      await page.getByRole("button", { name: "Previous page" }).click();
      await expect.poll(() => rows(page).count()).toBe(20);

      await page.getByLabel("Search").fill("invoices");
      await page.getByRole("button", { name: "Find" }).click();
      await expect.poll(() => total(page).textContent()).toBe("2 agents");
      expect(new URL(page.url()).searchParams.get("q")).toBe("invoices");

      await page.getByLabel("Search").fill("");
      await page.getByLabel("Tag").fill("general");
      await page.getByRole("button", { name: "Find" }).click();
      await expect.poll(() => total(page).textContent()).toBe(`${FILLERS} agents`);

      await page.getByLabel("Tag").fill("");
      await page.getByLabel("Provider").fill("Provider=Globex");
      await page.getByRole("button", { name: "Find" }).click();
      await expect.poll(() => total(page).textContent()).toBe("2 agents");

      await page.getByLabel("Provider").fill("");
      await page.getByLabel("Resource").fill("Refund=Create");
      await page.getByRole("button", { name: "Find" }).click();
      await expect.poll(() => total(page).textContent()).toBe("1 agent");
      await expect.poll(() => rows(page).locator("td").nth(1).textContent()).toBe("2.0.0");
      expect(await page.getByText("Other Tenant Agent").count()).toBe(0);
      // The row: name (a link), provider, version, status and when it changed, as the API lists them.
      const [listed] = (await api("GET", "/asor/v1/agentDefinition?resource=Refund%3DCreate")).data;
      expect(await rows(page).getByRole("link").textContent()).toBe(listed.name);
      expect(await rows(page).locator("td").allTextContents()).toEqual([
        listed.provider.descriptor,
        listed.version,
        listed.meta.status,
        expect.stringMatching(/\d/),
      ]);
      expect(await rows(page).locator("time").getAttribute("datetime")).toBe(listed.meta.updatedAt);

      // Everything the page fetched: its own files and the REST API, on the registry's origin; the token in no
      // address and in none of the browser's storage.
      expect(requests.length).toBeGreaterThan(5);
      for (const address of requests) {
        const url = new URL(address);
        expect(url.origin).toBe(server.baseUrl);
        expect(url.pathname).toMatch(/^\/ui\/|^\/asor\/v1\/agentDefinition/);
        for (const token of tokens) expect(address).not.toContain(token);
        expect(address).not.toContain("access_token");
      }
      expect(tokens.size).toBe(1);
      expect(await page.evaluate(() => localStorage.length + sessionStorage.length)).toBe(0);
      expect(watch.errors).toEqual([]);
    });

    it("opens an agent: its card, each skill's host resources, versions, card JSON and record", async () => {
      const { page, watch } = await newPage();
      await page.goto(`${server.baseUrl}/ui/agents?provider=Provider%3DGlobex`);
      await signIn(page);
      await page.getByRole("link", { name: "Invoice Agent" }).first().waitFor();
      const link = page.locator(`a[href="/ui/agents/${ids.v2}"]`);
      expect(await link.textContent()).toBe("Invoice Agent");
      await link.click();
      await page.getByRole("heading", { level: 1, name: "Invoice Agent" }).waitFor();

      const refund = page.getByRole("region", { name: "Skill Refund a payment" });
      await refund.getByRole("rowheader", { name: "POST /refunds" }).waitFor();
      expect(await refund.getByText("Refund=Create").count()).toBe(1);
      expect(await refund.getByText("Execution mode: Ambient").count()).toBe(1);
      const bill = page.getByRole("region", { name: "Skill Bill a customer" });
      expect(await bill.getByRole("rowheader").allTextContents()).toEqual(["POST /invoices", "GET /customers"]);
      expect(await bill.getByText("ledger-2024").count()).toBe(1);
      expect(await bill.getByRole("link", { name: "billing" }).count()).toBe(1);

      const versions = page.getByRole("region", { name: "Versions" });
      await versions.getByRole("listitem").nth(1).waitFor();
      expect(await versions.getByRole("listitem").allTextContents()).toEqual([
        expect.stringMatching(/^Version 2\.0\.0 ACTIVE/),
        expect.stringMatching(/^Version 1\.0\.0 ACTIVE/),
      ]);
      const card = page.getByLabel("Agent card JSON");
      await card.waitFor();
      const json = JSON.parse((await card.textContent()) ?? "");
      expect(json).toMatchObject({
        name: "Invoice Agent",
        version: "2.0.0",
        skills: [{ id: "bill" }, { id: "refund" }],
      });
      // The card as the registry serves it: with its signature (issue 43).
      expect(json.signatures).toEqual([{ protected: expect.any(String), signature: expect.any(String) }]);
      await page.context().grantPermissions(["clipboard-read", "clipboard-write"]);
      await page.getByRole("button", { name: "Copy card JSON" }).click();
      await page.getByText("Copied.").waitFor();
      expect(JSON.parse(await page.evaluate(() => navigator.clipboard.readText()))).toEqual(json);
      const record = page.getByRole("region", { name: "Registry record" });
      expect(await record.getByText(`"${ids.v2}-1"`).count()).toBe(1);
      const stored = await api("GET", `/asor/v1/agentDefinition/${ids.v2}`);
      expect(await record.locator("dt").allTextContents()).toEqual(
        expect.arrayContaining(["Created", "Updated", "Revision", "ETag"]),
      );
      expect(await record.locator("time").first().getAttribute("datetime")).toBe(stored.meta.createdAt);
      expect(await record.getByText(String(stored.meta.revision), { exact: true }).count()).toBe(1);
      // Readable 1280 pixels wide: nothing wider than the window.
      expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(
        0,
      );

      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "agent");
      if (db.name === "sqlite") await docsScreenshot(page, "catalog-agent");

      await versions.getByRole("link", { name: "Compare versions" }).click();
      await page.getByRole("heading", { level: 1, name: "Compare versions of Invoice Agent" }).waitFor();
      const skills = page.locator("table.compare").nth(1);
      await expect
        .poll(() => skills.locator("tr.change-added th").allTextContents())
        .toEqual(["Refund a payment (refund)"]);
      const members = page.locator("table.compare").first();
      expect(await members.locator("tr.change-changed th").allTextContents()).toEqual(["version"]);
      const resources = page.locator("table.compare").nth(2);
      expect(await resources.locator("tr.change-added th").allTextContents()).toEqual(["refund / POST /refunds"]);
      expect(await resources.locator("tr.change-same th").count()).toBe(2);
      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "compare");
      if (db.name === "sqlite") await docsScreenshot(page, "catalog-compare");
      expect(watch.errors).toEqual([]);
    });

    it("deprecates, deactivates, reactivates a version, each confirmed; a 412 when it changed underneath", async () => {
      // The browser reports the 412 answer, and the 410 of a deactivated version's agent card.
      const { page } = await newPage(1280, [412, 410]);
      await page.goto(`${server.baseUrl}/ui/agents/${ids.v1}`);
      await signIn(page);
      const heading = page.getByRole("heading", { level: 1, name: "Invoice Agent" });
      await heading.waitFor();
      await page.getByRole("button", { name: "Deprecate" }).click();
      const dialog = page.getByRole("dialog");
      await dialog.waitFor();
      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "confirm");
      await dialog.getByRole("button", { name: "Deprecate" }).click();
      await page.locator(".subtitle .badge", { hasText: "DEPRECATED" }).waitFor();
      expect((await api("GET", `/asor/v1/agentDefinition/${ids.v1}`)).meta.status).toBe("DEPRECATED");

      // Changed through the API between the page's read and the click: the click's If-Match is stale.
      await api("PATCH", `/asor/v1/agentDefinition/${ids.v1}/status`, { status: "ACTIVE", statusMessage: "by API" });
      await page.getByRole("button", { name: "Deactivate" }).click();
      await page.getByRole("dialog").getByRole("button", { name: "Deactivate" }).click();
      const alert = page.locator('[role="alert"][data-code="PRECONDITION_FAILED"]');
      await alert.waitFor();
      expect(await alert.textContent()).toMatch(/Someone else changed this version/);
      // The page shows the version as it is now: active again, with the API's message.
      await page.locator(".subtitle .badge", { hasText: "ACTIVE" }).waitFor();
      expect(await page.getByText("by API").count()).toBe(1);
      expect((await api("GET", `/asor/v1/agentDefinition/${ids.v1}`)).meta.status).toBe("ACTIVE");
      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "precondition-failed");

      // With the page's ETag current again: deactivate, then reactivate, each confirmed, each seen by the API.
      await page.getByRole("button", { name: "Deactivate" }).click();
      await page.getByRole("dialog").getByRole("button", { name: "Deactivate" }).click();
      await page.locator(".subtitle .badge", { hasText: "DEACTIVATED" }).waitFor();
      expect((await api("GET", `/asor/v1/agentDefinition/${ids.v1}`)).meta.status).toBe("DEACTIVATED");
      expect(await page.getByRole("button", { name: "Deactivate" }).count()).toBe(0);
      await page.locator('[role="alert"][data-code="CARD_DEACTIVATED"]').waitFor();
      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "deactivated");
      // The list leaves it out, and its status filter finds it among the deactivated ones, and leads back to it.
      await page.getByRole("link", { name: "Back to the agents" }).click();
      await expect.poll(() => total(page).textContent()).toBe(`${FILLERS + 2} agents`);
      await page.getByLabel("Status").selectOption("DEACTIVATED");
      await page.getByRole("button", { name: "Find" }).click();
      await expect.poll(() => total(page).textContent()).toBe("1 agent");
      expect(new URL(page.url()).searchParams.get("status")).toBe("DEACTIVATED");
      await rows(page).getByRole("link", { name: "Invoice Agent" }).click();
      await page.locator(".subtitle .badge", { hasText: "DEACTIVATED" }).waitFor();
      await page.getByRole("button", { name: "Reactivate" }).click();
      const reactivate = page.getByRole("dialog");
      expect(await reactivate.getByRole("heading").textContent()).toBe("Reactivate version 1.0.0 of Invoice Agent?");
      await reactivate.getByRole("button", { name: "Reactivate" }).click();
      await page.locator(".subtitle .badge", { hasText: "ACTIVE" }).waitFor();
      expect((await api("GET", `/asor/v1/agentDefinition/${ids.v1}`)).meta.status).toBe("ACTIVE");
      expect(await page.getByRole("button", { name: "Reactivate" }).count()).toBe(0);
    });

    it("renders a hostile definition as text and runs none of it", async () => {
      const { page, watch } = await newPage();
      await page.goto(`${server.baseUrl}/ui/agents?q=hostile`);
      await signIn(page);
      await page.locator("table.agents a").first().waitFor();
      expect(await page.locator("table.agents a").first().textContent()).toBe(`Hostile ${HOSTILE}`);
      await page.locator("table.agents a").first().click();
      await page.getByRole("heading", { level: 1 }).filter({ hasText: "Hostile" }).waitFor();
      expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe(`Hostile ${HOSTILE}`);
      await page.getByLabel("Agent card JSON").waitFor();
      for (const text of [`Description ${HOSTILE}`, `Skill description ${HOSTILE}`, `Tool ${HOSTILE}`])
        expect(await page.getByText(text, { exact: true }).count()).toBe(1);
      // Nothing the definition holds became an element: no img, no script, no b in the page's main part.
      expect(await page.locator("main img, main script, main b").count()).toBe(0);
      // A javascript: URL is shown, not linked.
      expect(await page.getByText("javascript:alert('doc')", { exact: true }).evaluate((e) => e.tagName)).toBe("DD");
      expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "hostile");
      expect(watch.dialogs).toEqual([]);
      expect(watch.errors).toEqual([]);
    });

    it("shows a token without Setup: Agents the list but not an agent, as the API answers", async () => {
      const { page } = await newPage(1280, [403]);
      await page.goto(`${server.baseUrl}/ui/agents?tag=finance`);
      await signIn(page, "default", ["Development"]);
      await expect.poll(() => total(page).textContent()).toBe("2 agents");
      await page.getByRole("link", { name: "Invoice Agent" }).first().click();
      const alert = page.locator('[role="alert"][data-code="PERMISSION_DENIED"]');
      await alert.waitFor();
      // The API's message and its code, as the API answered them.
      expect(await alert.textContent()).toMatch(/Setup: Agents.* \(PERMISSION_DENIED, HTTP 403\)$/);
      expect(await page.getByRole("heading", { name: "Skills" }).count()).toBe(0);
      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "permission-denied");
    });

    it("shows another tenant only its own agents", async () => {
      const { page } = await newPage(1280, [404]);
      await page.goto(`${server.baseUrl}/ui/agents`);
      await signIn(page, "other");
      await expect.poll(() => total(page).textContent()).toBe("1 agent");
      expect(await rows(page).locator("a").allTextContents()).toEqual(["Other Tenant Agent"]);
      // A default tenant's agent by its id: not this tenant's (the API's 404).
      await page.goto(`${server.baseUrl}/ui/agents/${ids.v1}`);
      await signIn(page, "other");
      await page.locator('[role="alert"][data-code="NOT_FOUND"]').waitFor();
      expect(await page.getByText("Invoice Agent").count()).toBe(0);
      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "not-found");
    });

    it("shows an error the API answers with its message and code, and the page around it", async () => {
      const { page } = await newPage(1280, [400]);
      await page.goto(`${server.baseUrl}/ui/agents`);
      await signIn(page);
      await expect.poll(() => total(page).textContent()).toBe(`${FILLERS + 3} agents`);
      // A search word too short for the API (q needs a word of 2 letters or more): its 400, field and all.
      await page.getByLabel("Search").fill("x");
      await page.getByRole("button", { name: "Find" }).click();
      const alert = page.getByRole("alert").filter({ hasText: "could not be read" });
      await alert.waitFor();
      const answer = await fetch(`${server.baseUrl}/asor/v1/agentDefinition?q=x`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const body = (await answer.json()) as { error: string; errors: { code: string }[] };
      expect(answer.status).toBe(400);
      expect(await alert.getAttribute("data-code")).toBe(body.errors[0]?.code);
      expect(await alert.textContent()).toBe(
        `The list could not be read: ${body.error} (${body.errors[0]?.code}, HTTP 400)`,
      );
      expect(body.error).toMatch(/^q /);
      // The search form is still there to correct it.
      expect(await page.getByLabel("Search").inputValue()).toBe("x");
      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "bad-request");
    });

    it("drops an answer that comes after the page moved on: the page shows where the visitor went", async () => {
      const { page, watch } = await newPage();
      await page.goto(`${server.baseUrl}/ui/agents?provider=Provider%3DGlobex`);
      await signIn(page);
      // The answer for version 1 is held until version 2's page is shown, then let through.
      let release: () => void = () => {};
      const held = new Promise<void>((resolve) => (release = resolve));
      await page.route(`**/asor/v1/agentDefinition/${ids.v1}`, async (route) => {
        await held;
        await route.continue();
      });
      await page.locator(`a[href="/ui/agents/${ids.v1}"]`).click();
      await page.evaluate((path) => {
        history.pushState(null, "", path);
        dispatchEvent(new PopStateEvent("popstate"));
      }, `/ui/agents/${ids.v2}`);
      await page.getByRole("heading", { level: 2, name: "Versions" }).waitFor();
      const version = () => page.locator(".subtitle").textContent();
      expect(await version()).toMatch(/^Version 2\.0\.0/);
      const answered = page.waitForResponse((r) => r.url().endsWith(`/agentDefinition/${ids.v1}`));
      release();
      await answered;
      // Whatever the late answer would have done, it has done by the time the page's next answer is shown.
      await page.getByLabel("Agent card JSON").waitFor();
      expect(await version()).toMatch(/^Version 2\.0\.0/);
      expect(new URL(page.url()).pathname).toBe(`/ui/agents/${ids.v2}`);
      expect(watch.errors).toEqual([]);
    });

    it("works from the keyboard: sign in, search, open an agent, open and close a confirmation", async () => {
      const { page, watch } = await newPage();
      await page.goto(`${server.baseUrl}/ui/`);
      await page.getByLabel("Tenant").focus();
      await page.keyboard.press("Enter");
      await page.getByLabel("Search").waitFor();
      await page.getByLabel("Search").focus();
      await page.keyboard.type("invoices");
      await page.keyboard.press("Enter");
      await expect.poll(() => total(page).textContent()).toBe("2 agents");
      // From the search box, Tab through the form's controls to the first agent's link, and follow it.
      for (let i = 0; i < 20; i++) {
        await page.keyboard.press("Tab");
        if (await page.evaluate(() => document.activeElement?.closest("table.agents") !== null)) break;
      }
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Invoice Agent");
      await page.keyboard.press("Enter");
      await page.getByRole("heading", { level: 1, name: "Invoice Agent" }).waitFor();
      // Tab on to a lifecycle button: its confirmation takes the focus (on Cancel), and Escape closes it with
      // nothing sent.
      const writes: string[] = [];
      page.on("request", (request) => {
        if (request.method() !== "GET") writes.push(`${request.method()} ${request.url()}`);
      });
      const focused = () => page.evaluate(() => document.activeElement?.textContent);
      for (let i = 0; i < 20 && (await focused()) !== "Deprecate"; i++) await page.keyboard.press("Tab");
      expect(await focused()).toBe("Deprecate");
      await page.keyboard.press("Enter");
      await page.getByRole("dialog").waitFor();
      expect(await focused()).toBe("Cancel");
      await page.keyboard.press("Escape");
      await page.getByRole("dialog").waitFor({ state: "hidden" });
      expect(writes).toEqual([]);
      expect(await page.locator(".subtitle .badge").textContent()).toBe("ACTIVE");
      expect(watch.errors).toEqual([]);
    });

    it("says so when the session expires, and shows nothing more until signed in again", async () => {
      const { page, watch } = await newPage();
      await page.clock.install();
      await page.goto(`${server.baseUrl}/ui/agents`);
      await signIn(page);
      await expect.poll(() => total(page).textContent()).toBe(`${FILLERS + 3} agents`);
      // The development sign-in's token lives an hour; the page's clock moves past it.
      await page.clock.runFor(3_601_000);
      await page.getByText("Your session has expired: sign in again.").waitFor();
      expect(await page.locator("table.agents").count()).toBe(0);
      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "expired");
      // Signed in again, the visitor is where they were. The page's clock is now an hour ahead of the issuer's:
      // the new token's end is reckoned from its expires_in on the page's clock, so it is not taken as expired.
      await signIn(page);
      await expect.poll(() => total(page).textContent()).toBe(`${FILLERS + 3} agents`);
      expect(new URL(page.url()).pathname).toBe("/ui/agents");
      await page.clock.runFor(60_000);
      expect(await rows(page).count()).toBe(20);
      expect(watch.errors).toEqual([]);
    });

    it("says so when the API refuses the token, and returns to the page once signed in again", async () => {
      const { page } = await newPage(1280, [401]);
      await page.goto(`${server.baseUrl}/ui/agents/${ids.v2}`);
      await signIn(page);
      await page.getByLabel("Agent card JSON").waitFor();
      // The registry stops taking the token (as it would a revoked or rotated one): the requests go out with a
      // token the registry cannot verify, and it answers them 401.
      await page.route("**/asor/v1/**", (route) =>
        route.continue({ headers: { ...route.request().headers(), authorization: "Bearer not-a-token" } }),
      );
      await page.getByRole("link", { name: "Back to the agents" }).click();
      const status = page.getByRole("status").filter({ hasText: "The registry refused your sign-in" });
      await status.waitFor();
      expect(await status.textContent()).toMatch(/sign in again\.$/);
      expect(await page.locator("table.agents").count()).toBe(0);
      await page.unroute("**/asor/v1/**");
      await signIn(page);
      await expect.poll(() => total(page).textContent()).toBe(`${FILLERS + 3} agents`);
      expect(new URL(page.url()).pathname).toBe("/ui/agents");
    });

    it("is readable 390 pixels wide: the list, an agent and a comparison fit the width", async () => {
      const { page, watch } = await newPage(390);
      await page.goto(`${server.baseUrl}/ui/agents/${ids.v2}`);
      await signIn(page);
      await page.getByLabel("Agent card JSON").waitFor();
      const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      expect(await overflow()).toBeLessThanOrEqual(0);
      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "agent-390");
      await page.getByRole("link", { name: "Back to the agents" }).click();
      await expect.poll(() => rows(page).count()).toBe(20);
      expect(await overflow()).toBeLessThanOrEqual(0);
      await shot(page, "agents-390");
      await page.goto(`${server.baseUrl}/ui/agents/${ids.v2}/compare?a=${ids.v1}&b=${ids.v2}`);
      await signIn(page);
      await page.locator("table.compare tr.change-added").first().waitFor();
      expect(await overflow()).toBeLessThanOrEqual(0);
      expect(await seriousViolations(page)).toEqual([]);
      await shot(page, "compare-390");
      expect(watch.errors).toEqual([]);
    });
  });
