import { ApiError } from "../api.js";
import { h } from "../dom.js";

/** An API error as the page shows it: the registry's message, its code and the HTTP status. */
export function errorBox(error: unknown, context?: string): HTMLElement {
  const prefix = context === undefined ? "" : `${context}: `;
  if (error instanceof ApiError) {
    const status = error.status === 0 ? "" : `, HTTP ${error.status}`;
    return h(
      "p",
      { role: "alert", class: "error", "data-code": error.code },
      `${prefix}${error.message} `,
      h("code", null, `(${error.code}${status})`),
    );
  }
  return h("p", { role: "alert", class: "error" }, `${prefix}${(error as Error).message ?? String(error)}`);
}

/** A status as a badge (its text is the status itself). */
export function statusBadge(status: string | undefined): HTMLElement {
  const value = status ?? "UNKNOWN";
  return h("span", { class: `badge status-${value.toLowerCase()}` }, value);
}

/** The display name of a reference: its descriptor, else its id. */
export function nameOf(reference: { id: string; descriptor?: string } | undefined): string {
  if (reference === undefined) return "";
  return reference.descriptor !== undefined && reference.descriptor !== "" ? reference.descriptor : reference.id;
}
