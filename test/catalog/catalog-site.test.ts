// The catalog's static site over files in memory: which answer each path gets, before and after a build.
import { describe, expect, it } from "vitest";
import { catalogCsp, createCatalogSite } from "../../src/catalog/catalog-site.js";

const utf8 = (text: string) => new TextEncoder().encode(text);
const none = () => undefined;

describe("the catalog's site", () => {
  it("says how to build the catalog when it is not built, and leaves an API client's / alone", async () => {
    const site = await createCatalogSite(undefined, catalogCsp([]));
    const answer = site.answer("GET", "/ui/", none);
    expect(answer?.status).toBe(404);
    expect(new TextDecoder().decode(answer?.body ?? undefined)).toMatch(/catalog is not built.*npm run build/);
    expect(site.answer("GET", "/", none)).toBeUndefined();
    expect(site.answer("GET", "/asor/v1/agentDefinition", none)).toBeUndefined();
  });

  it("serves the app for its routes but not for a missing file, and HEAD without a body", async () => {
    const files = new Map([
      ["index.html", utf8("<!doctype html><title>x</title>")],
      ["assets/index-abcdefgh.js", utf8("export {}")],
    ]);
    const site = await createCatalogSite(files, catalogCsp(["https://issuer.example"]));
    const route = site.answer("GET", "/ui/agents/Agent_ID=AGENT-1/compare", none);
    expect(route?.status).toBe(200);
    expect(route?.headers["content-security-policy"]).toContain("connect-src 'self' https://issuer.example;");
    expect(site.answer("GET", "/ui/missing.js", none)?.status).toBe(404);
    const head = site.answer("HEAD", "/ui/assets/index-abcdefgh.js", none);
    expect(head?.status).toBe(200);
    expect(head?.body).toBeNull();
    expect(head?.headers["cache-control"]).toBe("public, max-age=31536000, immutable");
    expect(site.answer("DELETE", "/ui/", none)?.status).toBe(405);
  });
});
