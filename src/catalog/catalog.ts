/**
 * The catalog: the web pages to find, read and retire agents (ui/), served by the registry at `/ui/`. The pages
 * are a client of the registry's REST API like any other: the registry serves their files and tells them how to
 * sign in, nothing more (catalog-site.ts, catalog-sign-in.ts).
 */
import type { HttpAnswer } from "../http/http-answer.js";
import { type CatalogSignInOptions, createCatalogSignIn, type SignInRequest } from "./catalog-sign-in.js";
import { type CatalogFiles, type CatalogSite, catalogCsp, createCatalogSite } from "./catalog-site.js";

export type { LocalTokenIssuer, SignInConfig } from "./catalog-sign-in.js";
export type { CatalogFiles } from "./catalog-site.js";

export interface Catalog {
  /** Whether the catalog serves `pathname` (for an embedding that hands other paths to its host). */
  serves(pathname: string): boolean;
  /** The answer to a request, or undefined when the catalog does not serve it. */
  answer(req: SignInRequest, pathname: string): Promise<HttpAnswer | undefined>;
}

export async function createCatalog(files: CatalogFiles | undefined, options: CatalogSignInOptions): Promise<Catalog> {
  const signIn = createCatalogSignIn(options);
  const issuer = options.signIn.kind === "oidc" ? [new URL(options.signIn.issuer).origin] : [];
  const site: CatalogSite = await createCatalogSite(files, catalogCsp(issuer));
  return {
    serves: (pathname) => site.serves(pathname),
    async answer(req, pathname) {
      if (pathname !== "/" && !pathname.startsWith("/ui")) return undefined;
      if (signIn.paths.has(pathname)) return signIn.answer(pathname, req);
      return site.answer(req.method, pathname, (name) => req.header(name));
    },
  };
}
