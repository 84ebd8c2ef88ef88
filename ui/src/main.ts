/**
 * The catalog's start: reads how to sign in (`/ui/config.json`), then shows the page of the address, or the
 * sign-in form while nobody is signed in (nothing of the registry is shown before). Every page is built with the
 * DOM API from the registry's answers (dom.ts), and talks to the registry only through its REST API (api.ts).
 */
import "./style.css";
import { h, replace } from "./dom.js";
import { agentPage } from "./pages/agent.js";
import { agentsPage } from "./pages/agents.js";
import { errorBox } from "./pages/common.js";
import { comparePage } from "./pages/compare.js";
import { navigate, routeOf, startRouter } from "./router.js";
import { currentSession, endSession, onSessionChange, takeEndReason } from "./session.js";
import { completeSignIn, type SignInConfig, signInForm } from "./sign-in.js";

const main = document.getElementById("main") as HTMLElement;
const sessionBar = document.getElementById("session") as HTMLElement;

async function readConfig(): Promise<SignInConfig> {
  const response = await fetch("/ui/config.json", { cache: "no-store" });
  if (!response.ok) throw new Error(`The catalog's configuration could not be read (HTTP ${response.status}).`);
  return ((await response.json()) as { signIn: SignInConfig }).signIn;
}

function showSession(): void {
  const session = currentSession();
  if (session === undefined) {
    replace(sessionBar);
    return;
  }
  replace(
    sessionBar,
    h("span", { class: "who" }, session.subject, session.tenant === undefined ? "" : ` · tenant ${session.tenant}`),
    " ",
    h("button", { type: "button", onclick: () => endSession("You signed out.") }, "Sign out"),
  );
}

function start(config: SignInConfig): void {
  let completing = false;
  const render = (): void => {
    showSession();
    const route = routeOf(location);
    if (route.page === "callback") {
      if (completing) return;
      completing = true;
      replace(main, h("p", { role: "status", class: "note" }, "Signing in…"));
      completeSignIn(config).then(
        (to) => {
          completing = false;
          navigate(to, true);
        },
        (error: unknown) => {
          completing = false;
          replace(main, signInForm(config, "/ui/agents"), errorBox(error, "Sign-in failed"));
        },
      );
      return;
    }
    if (currentSession() === undefined) {
      const returnTo = `${location.pathname}${location.search}`;
      replace(main, signInForm(config, returnTo, takeEndReason()));
      return;
    }
    document.title = "Agent catalog";
    if (route.page === "agents") agentsPage(main, route.query);
    else if (route.page === "agent") agentPage(main, route.id);
    else if (route.page === "compare") comparePage(main, route.id, route.query);
    else replace(main, h("h1", null, "Not found"), h("p", null, `Nothing at ${route.path}.`));
  };
  onSessionChange(render);
  startRouter(render);
}

readConfig().then(start, (error: unknown) => replace(main, h("h1", null, "Agent catalog"), errorBox(error)));
