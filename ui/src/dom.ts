/**
 * Building the page: elements made with the DOM API, every value from the registry put in as text (a text node
 * or an attribute), never parsed as HTML. There is no innerHTML anywhere in the catalog; a link's href is kept only
 * when it is http(s) or a path of this site, so a definition's `javascript:` URL stays text.
 */

export type Child = Node | string | number | false | null | undefined | readonly Child[];
type Value = string | number | boolean | null | undefined;
type Handler = (event: Event) => void;
export type Attrs = Readonly<Record<string, Value | Handler>>;

/** An element with attributes (`on<event>` ones are listeners) and children (strings become text nodes). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs | null = null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (typeof value === "function") element.addEventListener(name.slice(2).toLowerCase(), value);
    else if (name === "href") {
      const href = safeHref(value);
      if (href !== undefined) element.setAttribute("href", href);
    } else if (value === true) element.setAttribute(name, "");
    else if (value !== false && value !== null && value !== undefined) element.setAttribute(name, String(value));
  }
  append(element, children);
  return element;
}

/** Appends children (strings as text). */
export function append(parent: Node, children: readonly Child[]): void {
  for (const child of children) {
    if (child === false || child === null || child === undefined) continue;
    if (Array.isArray(child)) append(parent, child);
    else if (child instanceof Node) parent.appendChild(child);
    else parent.appendChild(document.createTextNode(String(child)));
  }
}

/** Replaces the children of `parent`. */
export function replace(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, children);
}

/** `value` when it is a path of this site or an absolute http(s) URL; undefined otherwise (javascript:, data:...). */
export function safeHref(value: Value | Handler): string | undefined {
  if (typeof value !== "string") return undefined;
  if (value.startsWith("/") && !value.startsWith("//")) return value;
  try {
    const url = new URL(value);
    return url.protocol === "https:" || url.protocol === "http:" ? url.href : undefined;
  } catch {
    return undefined;
  }
}

/** A definition-list row, skipped when the value is empty. */
export function field(label: string, value: Child): Child {
  if (value === undefined || value === null || value === "" || value === false) return null;
  return [h("dt", null, label), h("dd", null, value)];
}

/** An instant as the reader's locale writes it, in a <time> with the exact value. */
export function when(iso: string | undefined): Child {
  if (iso === undefined) return null;
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return h(
    "time",
    { datetime: iso, title: iso },
    date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }),
  );
}
