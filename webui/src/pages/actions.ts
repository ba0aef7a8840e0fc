// Which experiment actions make sense in which state, and running one with feedback.

import { api, errorMessage, type ExperimentAction } from "../api/client";
import { type Experiment, isActive } from "../api/types";
import { h } from "../ui/dom";

const STOPPED = new Set(["COMPLETED", "CANCELED", "ERROR", "DELETED"]);

export function allowedActions(e: Pick<Experiment, "state" | "archived">): ExperimentAction[] {
  if (STOPPED.has(e.state)) return [e.archived ? "unarchive" : "archive"];
  const out: ExperimentAction[] = [];
  if (isActive(e.state)) out.push("pause");
  if (e.state === "PAUSED") out.push("activate");
  if (!e.state.startsWith("STOPPING_")) out.push("cancel");
  if (e.state !== "STOPPING_KILLED") out.push("kill");
  return out;
}

const CONFIRM: Partial<Record<ExperimentAction, string>> = {
  kill: "Kill experiment {id}? Running trials stop at once, without a checkpoint.",
  cancel: "Cancel experiment {id}? Running trials stop after their next checkpoint.",
};

/** Buttons for the experiment's actions; `done` runs after an action succeeded. */
export function actionButtons(
  e: Experiment,
  onError: (message: string) => void,
  done: () => void,
): HTMLElement {
  const box = h("span", { class: "actions" });
  for (const action of allowedActions(e)) {
    const b = h("button", { type: "button", class: `small action-${action}`, data: { action } }, action);
    b.addEventListener("click", (event) => {
      event.stopPropagation();
      const question = CONFIRM[action];
      if (question && !window.confirm(question.replace("{id}", String(e.id)))) return;
      b.disabled = true;
      api
        .experimentAction(e.id, action)
        .then(done, (err: unknown) => onError(`Could not ${action} experiment ${e.id}: ${errorMessage(err)}`))
        .finally(() => {
          b.disabled = false;
        });
    });
    box.appendChild(b);
  }
  return box;
}
