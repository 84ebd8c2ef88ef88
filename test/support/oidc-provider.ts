// A real OpenID provider (panva/oidc-provider) on 127.0.0.1, port 0, for the
// auth tests: client_credentials grants, JWT access tokens for one resource
// (audience "asor", the default) and opaque ones for another (same audience),
// introspection and revocation. Each client's tenant and domains come out as
// custom claims (extraTokenClaims). The signing key is handed back so tests
// can forge tokens the issuer's key really signed (expired, wrong audience...). With a browser client, it also
// runs the authorization code flow with PKCE for the catalog: its own login and consent pages (devInteractions:
// any login name, which becomes the account's sub), and the account's tenant and domains as claims.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type CryptoKey, calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from "jose";
import Provider, { errors, type ResourceServer } from "oidc-provider";

/** The resource indicator whose access tokens are JWTs (the default resource). */
export const JWT_RESOURCE = "urn:asor:api";
/** The resource indicator whose access tokens are opaque (so they can be introspected). */
export const OPAQUE_RESOURCE = "urn:asor:api-opaque";
/** The audience of both resources. */
export const AUDIENCE = "asor";

export interface TestClient {
  readonly clientId: string;
  readonly clientSecret: string;
  /** Space-separated scopes the client may ask for. */
  readonly scope?: string;
  readonly tenant?: string;
  readonly domains?: readonly string[];
  /** Sets the `platform_admin` claim to true in its access tokens. */
  readonly platformAdmin?: boolean;
}

/** Switches a test can flip on the running issuer, to make it misbehave as real ones do. */
export interface IssuerFaults {
  /** The JWKS endpoint answers 503 while true. */
  jwksDown: boolean;
  /**
   * Rewrites each introspection answer (e.g. to strip `iss` and `aud`); undefined: answered as the provider
   * made it.
   */
  introspectionAnswer: ((answer: Record<string, unknown>) => Record<string, unknown>) | undefined;
}

export interface TestIssuer {
  /** The issuer identifier, e.g. http://127.0.0.1:41234 */
  readonly issuer: string;
  /** The issuer's signing key (ES256), its kid and public JWK. */
  readonly signingKey: CryptoKey;
  readonly kid: string;
  readonly publicJwk: JWK;
  /** The client the service introspects with. */
  readonly introspector: { readonly clientId: string; readonly clientSecret: string };
  /** Runs a client_credentials grant; returns the access token. */
  token(client: TestClient, options?: { resource?: string; scope?: string }): Promise<string>;
  /** Revokes a token (RFC 7009) as the client that got it. */
  revoke(client: TestClient, token: string): Promise<void>;
  /**
   * An OpenID Connect ID token the provider signs for `client` (its `aud` is
   * the client_id), as its authorization endpoint would hand out after a
   * login, with a `nonce`. Made through the provider's own IdToken model: the
   * login interaction itself is not what is under test.
   */
  idToken(client: TestClient, subject: string): Promise<string>;
  /** Counts of requests per endpoint path (e.g. `/jwks`, `/token/introspection`). */
  requests(path: string): number;
  readonly faults: IssuerFaults;
  close(): Promise<void>;
}

/** A public client of the authorization code flow with PKCE (the catalog), and the accounts that may sign in. */
export interface BrowserSignIn {
  readonly clientId: string;
  /**
   * The path of its redirect URI on 127.0.0.1. The client is a native one (RFC 8252), whose loopback redirect URI
   * matches on any port: the registry under test listens on a port picked at start, after the issuer.
   */
  readonly redirectPath: string;
  /** Each account's tenant and domains, by the login name typed on the login page. */
  readonly accounts: Readonly<Record<string, { readonly tenant?: string; readonly domains?: readonly string[] }>>;
}

const basic = (client: { clientId: string; clientSecret: string }): string =>
  `Basic ${btoa(`${encodeURIComponent(client.clientId)}:${encodeURIComponent(client.clientSecret)}`)}`;

export async function startOidcProvider(clients: readonly TestClient[], browser?: BrowserSignIn): Promise<TestIssuer> {
  const { privateKey } = await generateKeyPair("ES256", { extractable: true });
  const jwk = await exportJWK(privateKey);
  const kid = await calculateJwkThumbprint(jwk);
  const signingJwk = { ...jwk, kid, alg: "ES256", use: "sig" };
  const { d: _d, ...publicJwk } = signingJwk;
  const introspector = { clientId: "asor-introspector", clientSecret: "introspector-secret-0123456789abcdef" };

  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const byId = new Map(clients.map((c) => [c.clientId, c]));

  const resourceServer = (format: "jwt" | "opaque"): ResourceServer => ({
    scope: "asor.read asor.write",
    audience: AUDIENCE,
    accessTokenTTL: 600,
    accessTokenFormat: format,
    ...(format === "jwt" ? { jwt: { sign: { alg: "ES256" as const } } } : {}),
  });

  const provider = new Provider(issuer, {
    clients: [
      ...clients.map((c) => ({
        client_id: c.clientId,
        client_secret: c.clientSecret,
        grant_types: ["client_credentials"],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: "client_secret_basic" as const,
        ...(c.scope === undefined ? {} : { scope: c.scope }),
      })),
      ...(browser === undefined
        ? []
        : [
            {
              client_id: browser.clientId,
              application_type: "native" as const,
              token_endpoint_auth_method: "none" as const,
              grant_types: ["authorization_code"],
              response_types: ["code" as const],
              redirect_uris: [`http://127.0.0.1${browser.redirectPath}`],
            },
          ]),
      {
        client_id: introspector.clientId,
        client_secret: introspector.clientSecret,
        grant_types: [],
        response_types: [],
        redirect_uris: [],
        token_endpoint_auth_method: "client_secret_basic" as const,
      },
    ],
    jwks: { keys: [signingJwk as never] },
    // The only key is ES256; the default RS256 would make every client invalid.
    clientDefaults: { id_token_signed_response_alg: "ES256" },
    ttl: { ClientCredentials: 600 },
    scopes: ["asor.read", "asor.write"],
    // The browser client's token request comes from the registry's origin (127.0.0.1 on its own port).
    clientBasedCORS: (_ctx, origin, client) =>
      browser !== undefined && client.clientId === browser.clientId && /^http:\/\/127\.0\.0\.1:\d+$/.test(origin),
    findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    features: {
      devInteractions: { enabled: browser !== undefined },
      clientCredentials: { enabled: true },
      introspection: {
        enabled: true,
        allowedPolicy: async (_ctx, client) => client.clientId === introspector.clientId,
      },
      revocation: { enabled: true, allowedPolicy: async (_ctx, client, token) => client.clientId === token.clientId },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => JWT_RESOURCE,
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx, resourceIndicator) => {
          if (resourceIndicator === JWT_RESOURCE) return resourceServer("jwt");
          if (resourceIndicator === OPAQUE_RESOURCE) return resourceServer("opaque");
          throw new errors.InvalidTarget();
        },
      },
    },
    extraTokenClaims: async (_ctx, token) => {
      const account =
        "accountId" in token && typeof token.accountId === "string" ? browser?.accounts[token.accountId] : undefined;
      if (account !== undefined)
        return {
          ...(account.tenant === undefined ? {} : { tenant: account.tenant }),
          ...(account.domains === undefined ? {} : { domains: [...account.domains] }),
        };
      const client = "clientId" in token && typeof token.clientId === "string" ? byId.get(token.clientId) : undefined;
      if (client === undefined) return undefined;
      return {
        ...(client.tenant === undefined ? {} : { tenant: client.tenant }),
        ...(client.domains === undefined ? {} : { domains: [...client.domains] }),
        ...(client.platformAdmin === true ? { platform_admin: true } : {}),
      };
    },
  });
  const faults: IssuerFaults = { jwksDown: false, introspectionAnswer: undefined };
  const counts = new Map<string, number>();
  provider.use(async (ctx, next) => {
    counts.set(ctx.path, (counts.get(ctx.path) ?? 0) + 1);
    if (ctx.path === "/jwks" && faults.jwksDown) {
      ctx.status = 503;
      ctx.body = "down for the test";
      return;
    }
    await next();
    if (ctx.path === "/token/introspection" && faults.introspectionAnswer !== undefined && ctx.status === 200) {
      ctx.body = faults.introspectionAnswer(ctx.body as Record<string, unknown>);
    }
  });
  server.on("request", provider.callback());

  const post = async (
    path: string,
    client: { clientId: string; clientSecret: string },
    body: Record<string, string>,
  ): Promise<Response> =>
    fetch(`${issuer}${path}`, {
      method: "POST",
      headers: { authorization: basic(client), "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(body),
    });

  return {
    issuer,
    signingKey: privateKey,
    kid,
    publicJwk,
    introspector,
    async token(client, options = {}) {
      const body: Record<string, string> = { grant_type: "client_credentials" };
      if (options.resource !== undefined) body.resource = options.resource;
      if (options.scope !== undefined) body.scope = options.scope;
      const response = await post("/token", client, body);
      const json = (await response.json()) as { access_token?: string; error?: string; error_description?: string };
      if (!response.ok || json.access_token === undefined)
        throw new Error(`token request failed: ${response.status} ${json.error}: ${json.error_description}`);
      return json.access_token;
    },
    async idToken(client, subject) {
      const registered = await provider.Client.find(client.clientId);
      if (registered === undefined) throw new Error(`no client ${client.clientId}`);
      const token = new provider.IdToken({ sub: subject }, { client: registered });
      // The scope the claims are masked with, as the authorization endpoint sets it (not in the model's types).
      Object.assign(token, { scope: "openid" });
      token.set("nonce", crypto.randomUUID());
      token.set("auth_time", Math.floor(Date.now() / 1000));
      return token.issue({ use: "idtoken" });
    },
    requests: (path) => counts.get(path) ?? 0,
    faults,
    async revoke(client, token) {
      const response = await post("/token/revocation", client, { token, token_type_hint: "access_token" });
      if (!response.ok) throw new Error(`revocation failed: ${response.status} ${await response.text()}`);
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
