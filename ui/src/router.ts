/**
 * The catalog's addresses, all under /ui/: the History API moves between them without loading the page again
 * (which would lose the in-memory session). Links to /ui/ paths are followed here; others leave the page.
 */

export type Route =
  | { readonly page: "agents"; readonly query: URLSearchParams }
  | { readonly page: "agent"; readonly id: string }
  | { readonly page: "compare"; readonly id: string; readonly query: URLSearchParams }
  | { readonly page: "callback"; readonly query: URLSearchParams }
  | { readonly page: "not-found"; readonly path: string };

export function routeOf(location: Location): Route {
  const path = location.pathname.replace(/\/+$/, "");
  const query = new URLSearchParams(location.search);
  if (path === "/ui" || path === "/ui/agents") return { page: "agents", query };
  if (path === "/ui/callback") return { page: "callback", query };
  const agent = /^\/ui\/agents\/([^/]+)(\/compare)?$/.exec(path);
  if (agent?.[1] !== undefined) {
    const id = decodeURIComponent(agent[1]);
    return agent[2] === undefined ? { page: "agent", id } : { page: "compare", id, query };
  }
  return { page: "not-found", path: location.pathname };
}

let render: () => void = () => {};

/** Installs the renderer, follows /ui/ links and the browser's back and forward buttons. */
export function startRouter(renderer: () => void): void {
  render = renderer;
  window.addEventListener("popstate", () => render());
  document.addEventListener("click", (event) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
    const link = (event.target as Element | null)?.closest?.("a");
    const href = link?.getAttribute("href");
    if (link === null || link === undefined || href === null || href === undefined || !href.startsWith("/ui/")) return;
    event.preventDefault();
    navigate(href);
  });
  render();
}

/** Goes to a /ui/ address (pushed on the history, or replacing the current entry). */
export function navigate(href: string, replace = false): void {
  if (replace) history.replaceState(null, "", href);
  else history.pushState(null, "", href);
  render();
}

/** The path of an agent's page. */
export function agentPath(id: string): string {
  return `/ui/agents/${encodeURIComponent(id)}`;
}
