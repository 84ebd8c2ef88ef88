/**
 * The lifecycle buttons of a version: Deprecate, Deactivate, Reactivate (`PATCH .../{id}/status`), each after a
 * confirmation, sent with `If-Match` naming the ETag the page was read with. A 412 means someone changed the
 * version since: the page says so and reloads its current state.
 */
import { ApiError, setStatus } from "../api.js";
import { h } from "../dom.js";
import type { Definition } from "../model.js";
import { errorBox } from "./common.js";

const ACTIONS: readonly { label: string; status: string; says: string }[] = [
  { label: "Deprecate", status: "DEPRECATED", says: "It stays listed and usable, marked as deprecated." },
  { label: "Deactivate", status: "DEACTIVATED", says: "It leaves the list and its agent card is withdrawn." },
  { label: "Reactivate", status: "ACTIVE", says: "It is listed and usable again." },
];

/** The buttons for `d`; `reload(notice)` shows the version again, with a notice above it. */
export function lifecycle(
  d: Definition,
  etag: string | undefined,
  reload: (notice?: HTMLElement) => void,
): HTMLElement {
  const outcome = h("div", { class: "outcome" });
  const dialog = h("dialog", { "aria-labelledby": "confirm-h" });
  const buttons = ACTIONS.filter((a) => a.status !== d.meta?.status).map((action) =>
    h(
      "button",
      {
        type: "button",
        class: action.status === "DEACTIVATED" ? "danger" : undefined,
        onclick: () => confirm(action),
      },
      action.label,
    ),
  );
  const confirm = (action: (typeof ACTIONS)[number]): void => {
    const yes = h(
      "button",
      { type: "button", class: action.status === "DEACTIVATED" ? "danger" : undefined },
      action.label,
    );
    const no = h("button", { type: "button" }, "Cancel");
    dialog.replaceChildren(
      h("h2", { id: "confirm-h" }, `${action.label} version ${d.version} of ${d.name}?`),
      h("p", null, action.says),
      h("div", { class: "actions" }, yes, " ", no),
    );
    no.addEventListener("click", () => dialog.close());
    yes.addEventListener("click", () => {
      dialog.close();
      apply(action.status);
    });
    dialog.showModal();
    no.focus();
  };
  const apply = (status: string): void => {
    if (etag === undefined) {
      outcome.replaceChildren(h("p", { role: "alert", class: "error" }, "This version was read without an ETag."));
      return;
    }
    for (const b of buttons) b.disabled = true;
    setStatus(d.id, status, etag).then(
      () => reload(),
      (error: unknown) => {
        if (error instanceof ApiError && error.status === 412) {
          reload(
            h(
              "p",
              { role: "alert", class: "error", "data-code": error.code },
              "Someone else changed this version after you opened it, so nothing was changed ",
              h("code", null, `(${error.code}, HTTP 412)`),
              ". This is its current state.",
            ),
          );
          return;
        }
        for (const b of buttons) b.disabled = false;
        outcome.replaceChildren(errorBox(error, "The status was not changed"));
      },
    );
  };
  return h(
    "section",
    { "aria-labelledby": "lifecycle-h", class: "lifecycle" },
    h("h2", { id: "lifecycle-h" }, "Lifecycle"),
    h("div", { class: "actions" }, buttons),
    outcome,
    dialog,
  );
}
