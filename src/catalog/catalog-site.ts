/**
 * The catalog's static files, served at `/ui/`: the single-page app that `npm run build` makes from `ui/` (Vite,
 * into `dist/ui/`). No I/O here: the entrypoint reads the files once at start-up (src/main/catalog-files.ts) and
 * this module answers from memory.
 *
 * - `/ui/assets/*` are content-hashed by the build: a new build gives them new names, so they are cached for a
 *   year and `immutable`.
 * - `index.html` (also the answer to any other path under `/ui/` without a file extension: the app's own routes,
 *   `/ui/agents/...`) is `no-cache`: a browser revalidates it on each load (its ETag answers 304 while unchanged)
 *   and so finds a new build at once.
 * - Every answer carries the Content-Security-Policy below: scripts and styles from this origin only (the build
 *   emits no inline script or style), no frames around it, API calls to this origin and the sign-in issuer.
 * - `GET /` from a browser (`Accept` naming text/html) is redirected to `/ui/`; other clients keep the API's 404.
 */
import { noResourceAt, RegistryError } from "../domain/errors.js";
import { errorAnswer, type HttpAnswer, headOnly, methodNotAllowedAnswer } from "../http/http-answer.js";

/** Where the catalog is served. */
export const CATALOG_PATH = "/ui/";

/** The built files by their path below `/ui/` (e.g. `index.html`, `assets/index-3f2a1b.js`). */
export type CatalogFiles = ReadonlyMap<string, Uint8Array>;

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
  json: "application/json; charset=utf-8",
  svg: "image/svg+xml",
  png: "image/png",
  ico: "image/x-icon",
  woff2: "font/woff2",
  txt: "text/plain; charset=utf-8",
};

const IMMUTABLE = "public, max-age=31536000, immutable";

/**
 * The Content-Security-Policy of every catalog answer. `connectOrigins`: origins besides this one the app may
 * call (the OpenID issuer's discovery and token endpoints).
 */
export function catalogCsp(connectOrigins: readonly string[]): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    `connect-src ${["'self'", ...connectOrigins].join(" ")}`,
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
}

export interface CatalogSite {
  /** Whether the site answers `pathname` (`/ui`, anything under `/ui/`). */
  serves(pathname: string): boolean;
  /**
   * The answer to a request for `pathname`, undefined when the site does not serve it (`/` from a client that is
   * not a browser: the API's 404).
   */
  answer(method: string, pathname: string, header: (name: string) => string | undefined): HttpAnswer | undefined;
}

interface Entry {
  readonly body: Uint8Array;
  readonly headers: Readonly<Record<string, string>>;
  readonly etag: string;
}

/** The site over `files` (undefined or empty: not built; `/ui/` answers 404 saying how to build it). */
export async function createCatalogSite(files: CatalogFiles | undefined, csp: string): Promise<CatalogSite> {
  const security = {
    "content-security-policy": csp,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
  };
  const entries = new Map<string, Entry>();
  for (const [path, body] of files ?? []) {
    const extension = path.slice(path.lastIndexOf(".") + 1);
    const etag = `"${await digest(body)}"`;
    entries.set(path, {
      body,
      etag,
      headers: {
        ...security,
        "content-type": CONTENT_TYPES[extension] ?? "application/octet-stream",
        "cache-control": path.startsWith("assets/") ? IMMUTABLE : "no-cache",
        etag,
      },
    });
  }
  const index = entries.get("index.html");

  const serves = (pathname: string): boolean => pathname === "/ui" || pathname.startsWith(CATALOG_PATH);
  return {
    serves,
    answer(method, pathname, header) {
      if (pathname === "/") {
        if (method !== "GET" && method !== "HEAD") return undefined;
        if (!/\btext\/html\b/.test(header("accept") ?? "")) return undefined;
        return redirect(302, CATALOG_PATH, { vary: "Accept" });
      }
      if (!serves(pathname)) return undefined;
      if (method !== "GET" && method !== "HEAD") return methodNotAllowedAnswer(method, ["GET", "HEAD"]);
      if (pathname === "/ui") return redirect(301, CATALOG_PATH);
      const path = pathname.slice(CATALOG_PATH.length);
      // A file, else one of the app's routes (no extension in the last segment): the app itself.
      const entry = entries.get(path) ?? (/(^|\/)[^/.]*$/.test(path) ? index : undefined);
      if (entry === undefined) {
        const missing = index === undefined ? notBuilt(pathname) : noResourceAt(pathname);
        return errorAnswer(missing, security);
      }
      if (matches(header("if-none-match"), entry.etag)) return { status: 304, headers: entry.headers, body: null };
      const answer = { status: 200, headers: entry.headers, body: entry.body };
      return method === "HEAD" ? headOnly(answer) : answer;
    },
  };
}

function notBuilt(pathname: string): RegistryError {
  return new RegistryError(
    "NOT_FOUND",
    `No resource at ${pathname}: the catalog is not built (npm run build builds it; npm start does when missing).`,
  );
}

function redirect(status: number, location: string, headers: Record<string, string> = {}): HttpAnswer {
  return { status, headers: { location, "cache-control": "no-cache", ...headers }, body: null };
}

/** Weak comparison of an If-None-Match list with `etag` (RFC 9110 13.1.2). */
function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false;
  return ifNoneMatch.split(",").some((tag) => {
    const t = tag.trim();
    return t === "*" || t.replace(/^W\//, "") === etag;
  });
}

/** The first 16 bytes of the SHA-256 of `body`, in hex: a strong validator of the file. */
async function digest(body: Uint8Array): Promise<string> {
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", body as Uint8Array<ArrayBuffer>));
  return [...hash.subarray(0, 16)].map((b) => b.toString(16).padStart(2, "0")).join("");
}
