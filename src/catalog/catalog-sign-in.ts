/**
 * How the catalog signs a visitor in, as two endpoints beside its files:
 *
 * - `GET /ui/config.json` tells the app which way: `{"signIn": {"kind": "local"}}` with the local development
 *   issuer; `{"kind": "oidc", issuer, clientId, scope, resource?, allowHttp}` with AUTH_ISSUER and
 *   UI_OIDC_CLIENT_ID (authorization code + PKCE, the app's redirect URI being `<origin>/ui/callback`);
 *   `{"kind": "none", "reason"}` with AUTH_ISSUER but no client id.
 * - `POST /ui/dev-token` (only while the local development issuer is on, so never with AUTH_ISSUER) takes
 *   `{"tenant": "...", "domains": [...]}` and answers a token of the local issuer for them, as
 *   `npm run token -- --tenant <t> --domains <d>` would print: `{"access_token", "token_type", "expires_in"}`.
 *   It answers JSON bodies only, so a page of another origin cannot send it without a CORS preflight, which is
 *   never granted; and only requests made on this machine to a loopback address (`assertFromThisMachine`), whatever
 *   HOST says and wherever the registry is mounted.
 */

import { forbidden, invalid, issueAt, noResourceAt, RegistryError, tooLarge } from "../domain/errors.js";
import { errorAnswer, type HttpAnswer, headOnly, jsonAnswer, methodNotAllowedAnswer } from "../http/http-answer.js";
import type { SignInConfig } from "./sign-in-config.js";

/** The config path the app reads at start. */
export const CATALOG_CONFIG_PATH = "/ui/config.json";
/** The local issuer's sign-in path. */
export const DEV_TOKEN_PATH = "/ui/dev-token";

export type { SignInConfig };

/** What the sign-in endpoints read of a request (the edge's request is one). */
export interface SignInRequest {
  readonly method: string;
  header(name: string): string | undefined;
  bodyBytes(limit: number): Promise<Uint8Array | undefined>;
  /** The addresses of the connection it came on: the socket's own (`local`) and its peer's (`remote`). */
  addresses(): { readonly local: string | undefined; readonly remote: string | undefined };
  /** The authority it was sent to (HTTP/2 `:authority`, HTTP/1.1 `Host`); undefined when none or unclear. */
  authority(): string | undefined;
}

/** Issues a token of the local development issuer. */
export type LocalTokenIssuer = (request: {
  readonly tenant: string;
  readonly domains: readonly string[];
  readonly ttlSeconds: number;
}) => Promise<string>;

export interface CatalogSignInOptions {
  readonly signIn: SignInConfig;
  /** The local issuer, when it is on (no AUTH_ISSUER); the dev-token endpoint exists only then. */
  readonly localIssuer: LocalTokenIssuer | undefined;
  /** The lifetime of a dev token, in seconds. */
  readonly ttlSeconds: number;
}

const TENANT = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const MAX_BODY = 4096;
const MAX_DOMAINS = 16;
const MAX_DOMAIN_LENGTH = 100;

/** The two endpoints by path; `answer` is undefined for any other path. */
export function createCatalogSignIn(options: CatalogSignInOptions) {
  const config = jsonAnswer(200, { signIn: options.signIn }, { "cache-control": "no-cache" });
  const paths: ReadonlySet<string> = new Set([CATALOG_CONFIG_PATH, DEV_TOKEN_PATH]);
  return {
    paths,
    async answer(pathname: string, req: SignInRequest): Promise<HttpAnswer | undefined> {
      if (pathname === CATALOG_CONFIG_PATH) {
        if (req.method !== "GET" && req.method !== "HEAD") return methodNotAllowedAnswer(req.method, ["GET", "HEAD"]);
        return req.method === "HEAD" ? headOnly(config) : config;
      }
      if (pathname !== DEV_TOKEN_PATH) return undefined;
      const issuer = options.localIssuer;
      if (issuer === undefined) return errorAnswer(noResourceAt(pathname));
      if (req.method !== "POST") return methodNotAllowedAnswer(req.method, ["POST"]);
      try {
        assertFromThisMachine(req);
        const { tenant, domains } = await readRequest(req);
        const token = await issuer({ tenant, domains, ttlSeconds: options.ttlSeconds });
        return jsonAnswer(
          200,
          { access_token: token, token_type: "Bearer", expires_in: options.ttlSeconds },
          { "cache-control": "no-store" },
        );
      } catch (err) {
        if (err instanceof RegistryError) return errorAnswer(err);
        throw err;
      }
    },
  };
}

async function readRequest(req: SignInRequest): Promise<{ tenant: string; domains: string[] }> {
  const type = (req.header("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== "application/json")
    throw new RegistryError("UNSUPPORTED_MEDIA_TYPE", "The development sign-in takes application/json only.");
  const bytes = await req.bodyBytes(MAX_BODY);
  if (bytes === undefined) throw tooLarge(MAX_BODY);
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw invalid([issueAt("", "MALFORMED_JSON", "The body is not valid JSON.")]);
  }
  const { tenant, domains } = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  const issues = [];
  if (typeof tenant !== "string" || !TENANT.test(tenant))
    issues.push(issueAt("tenant", "PATTERN_MISMATCH", "tenant must be a tenant name (letters, digits, _ . -)."));
  const list = Array.isArray(domains) ? domains : [];
  if (
    !Array.isArray(domains) ||
    list.length > MAX_DOMAINS ||
    list.some((d) => typeof d !== "string" || d.trim() === "" || d.length > MAX_DOMAIN_LENGTH)
  )
    issues.push(
      issueAt("domains", "INVALID_VALUE", `domains must be a list of at most ${MAX_DOMAINS} security domain names.`),
    );
  if (issues.length > 0) throw invalid(issues);
  return { tenant: tenant as string, domains: (list as string[]).map((d) => d.trim()) };
}

const OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const LOOPBACK_V4 = `127(\\.${OCTET}){3}`;
/** A loopback socket address as Node gives it: 127.0.0.0/8, `::1`, or 127.0.0.0/8 mapped into IPv6. */
const LOOPBACK_ADDRESS = new RegExp(`^(${LOOPBACK_V4}|::1|::ffff:${LOOPBACK_V4})$`, "i");
/** A loopback authority, whole: `localhost`, 127.0.0.0/8 or `[::1]`, with at most a port after it. */
const LOOPBACK_AUTHORITY = new RegExp(`^(localhost|${LOOPBACK_V4}|\\[::1\\])(:[0-9]{1,5})?$`, "i");

/**
 * Refuses (PERMISSION_DENIED) a request that was not made on this machine to a loopback address:
 * - its socket's own address and its peer's must both be loopback. The socket tells where the request arrived,
 *   whatever HOST says (the registry mounted in an express app listens where its host listens) and whatever the
 *   request says of itself;
 * - it must have been sent to a loopback authority (`:authority` over HTTP/2, `Host` over HTTP/1.1), exactly, so
 *   that a page whose name an attacker points at 127.0.0.1 (DNS rebinding) is refused, and a proxy of this machine
 *   that forwards others' requests with their own authority too;
 * - it must not say it was forwarded (`Forwarded`, `X-Forwarded-For`): a proxy of this machine that says so
 *   forwards someone else's request.
 */
function assertFromThisMachine(req: SignInRequest): void {
  const { local, remote } = req.addresses();
  if (!LOOPBACK_ADDRESS.test(local ?? "") || !LOOPBACK_ADDRESS.test(remote ?? ""))
    throw forbidden("The development sign-in answers only connections from this machine to a loopback address.");
  if (!LOOPBACK_AUTHORITY.test(req.authority() ?? ""))
    throw forbidden(
      "The development sign-in answers only requests sent to a loopback address: Host (HTTP/2 :authority) " +
        "localhost, 127.0.0.1 or [::1], with or without a port.",
    );
  if (req.header("forwarded") !== undefined || req.header("x-forwarded-for") !== undefined)
    throw forbidden(
      "The development sign-in does not answer requests forwarded by a proxy (Forwarded, X-Forwarded-For).",
    );
}
