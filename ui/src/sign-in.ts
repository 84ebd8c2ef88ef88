/**
 * Signing in. With the registry's local development issuer: a form asking the tenant and the security domains,
 * POSTed to /ui/dev-token, which answers a token of that issuer. With AUTH_ISSUER: OpenID Connect authorization
 * code with PKCE (RFC 7636; the implicit flow the contract names is deprecated by OAuth 2.0 Security BCP, RFC 9700)
 * through openid-client. Between the redirect and the callback, the PKCE verifier and the state wait in
 * sessionStorage (this tab only, removed at the callback); the token itself is only ever in memory.
 */
import * as oidc from "openid-client";
import type { SignInConfig } from "../../src/catalog/sign-in-config.js";
import { h } from "./dom.js";
import { startSession } from "./session.js";

export type { SignInConfig };

const PENDING = "asor.catalog.sign-in";
const DOMAINS = ["Development", "Setup: Agents"];

interface Pending {
  readonly verifier: string;
  readonly state: string;
  readonly returnTo: string;
}

/**
 * The sign-in form for `config`; `returnTo` is where the visitor goes once signed in. A local sign-in starts the
 * session, whose listeners show the page (the form renders nothing itself).
 */
export function signInForm(config: SignInConfig, returnTo: string, reason?: string): HTMLElement {
  const status = h("p", { role: "status", class: "note" }, reason ?? "");
  const error = h("p", { role: "alert", class: "error" });
  if (config.kind === "none")
    return h("section", { class: "sign-in" }, h("h1", null, "Sign in"), h("p", { class: "error" }, config.reason));
  if (config.kind === "oidc") {
    const button = h("button", { type: "submit" }, "Sign in");
    return h(
      "form",
      {
        class: "sign-in",
        onsubmit: (event: Event) => {
          event.preventDefault();
          button.disabled = true;
          redirectToIssuer(config, returnTo).catch((e: unknown) => {
            button.disabled = false;
            error.textContent = `Sign-in failed: ${(e as Error).message}`;
          });
        },
      },
      h("h1", null, "Sign in"),
      status,
      h("p", null, "You sign in with your organisation's identity provider."),
      button,
      error,
    );
  }
  const tenant = h("input", { id: "tenant", name: "tenant", value: "default", required: true, autocomplete: "off" });
  const boxes = DOMAINS.map((domain, i) =>
    h("input", { type: "checkbox", id: `domain-${i}`, name: "domains", value: domain, checked: true }),
  );
  const button = h("button", { type: "submit" }, "Sign in");
  return h(
    "form",
    {
      class: "sign-in",
      onsubmit: (event: Event) => {
        event.preventDefault();
        button.disabled = true;
        const domains = boxes.filter((b) => b.checked).map((b) => b.value);
        localSignIn(tenant.value.trim(), domains).catch((e: unknown) => {
          button.disabled = false;
          error.textContent = (e as Error).message;
        });
      },
    },
    h("h1", null, "Sign in"),
    status,
    h("p", { class: "note" }, "Development sign-in: the registry's local development issuer makes you a token."),
    h("label", { for: "tenant" }, "Tenant"),
    tenant,
    h(
      "fieldset",
      null,
      h("legend", null, "Security domains"),
      boxes.map((box, i) => h("div", { class: "check" }, box, h("label", { for: `domain-${i}` }, DOMAINS[i]))),
    ),
    button,
    error,
  );
}

async function localSignIn(tenant: string, domains: string[]): Promise<void> {
  const response = await fetch("/ui/dev-token", {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({ tenant, domains }),
    cache: "no-store",
  });
  const body = (await response.json().catch(() => ({}))) as {
    access_token?: string;
    expires_in?: number;
    error?: string;
    code?: string;
    errors?: { code?: string }[];
  };
  if (!response.ok || body.access_token === undefined) {
    const code = body.code ?? body.errors?.[0]?.code ?? `HTTP_${response.status}`;
    throw new Error(`Sign-in failed: ${body.error ?? response.statusText} (${code})`);
  }
  startSession(body.access_token, body.expires_in);
}

function redirectUri(): string {
  return `${location.origin}/ui/callback`;
}

async function discover(config: Extract<SignInConfig, { kind: "oidc" }>): Promise<oidc.Configuration> {
  return oidc.discovery(new URL(config.issuer), config.clientId, undefined, oidc.None(), {
    execute: config.allowHttp ? [oidc.allowInsecureRequests] : [],
  });
}

async function redirectToIssuer(config: Extract<SignInConfig, { kind: "oidc" }>, returnTo: string): Promise<void> {
  const configuration = await discover(config);
  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const pending: Pending = { verifier, state, returnTo };
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  const url = oidc.buildAuthorizationUrl(configuration, {
    redirect_uri: redirectUri(),
    scope: config.scope,
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: "S256",
    state,
    ...(config.resource === undefined ? {} : { resource: config.resource }),
  });
  location.assign(url.href);
}

/**
 * The issuer sent the visitor back (`/ui/callback?code=...&state=...`): trades the code and the verifier for the
 * token, and answers where to go next. The callback's address (its code) is replaced in the history at once.
 */
export async function completeSignIn(config: SignInConfig): Promise<string> {
  const current = new URL(location.href);
  history.replaceState(null, "", "/ui/callback");
  const stored = sessionStorage.getItem(PENDING);
  sessionStorage.removeItem(PENDING);
  if (config.kind !== "oidc") throw new Error("This registry does not sign in through an OpenID issuer.");
  if (stored === null) throw new Error("No sign-in was started in this tab: start again.");
  const pending = JSON.parse(stored) as Pending;
  const configuration = await discover(config);
  const tokens = await oidc.authorizationCodeGrant(
    configuration,
    current,
    { pkceCodeVerifier: pending.verifier, expectedState: pending.state },
    config.resource === undefined ? undefined : { resource: config.resource },
  );
  startSession(tokens.access_token, tokens.expires_in);
  return pending.returnTo.startsWith("/ui/") ? pending.returnTo : "/ui/agents";
}
