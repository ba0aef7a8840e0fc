// "Move to project": choose a workspace, then one of its projects, and move an experiment
// there (POST /api/v1/experiments/{id}/move). The master decides who may.

import { api, errorMessage } from "../api/client";
import type { Experiment } from "../api/types";
import { button, h, replace } from "../ui/dom";
import { Notice } from "../ui/widgets";

/** A modal of `title` with `body` and the buttons; removed from the page when closed. */
export function modal(title: string, ...body: Node[]): HTMLDialogElement {
  const dialog = h("dialog", { class: "modal" }, h("h2", {}, title), ...body);
  dialog.addEventListener("close", () => dialog.remove());
  document.body.appendChild(dialog);
  dialog.showModal();
  return dialog;
}

export function openMoveDialog(e: Pick<Experiment, "id" | "name">, done: () => void): void {
  const notice = new Notice();
  const workspaceSelect = h("select", { class: "move-workspace", disabled: true });
  const projectSelect = h("select", { class: "move-project", disabled: true });
  const move = button("Move", () => {
    const projectId = Number(projectSelect.value);
    if (!projectId) return;
    move.disabled = true;
    api.moveExperiment(e.id, projectId).then(
      () => {
        dialog.close();
        done();
      },
      (err: unknown) => {
        notice.error(`Could not move experiment ${e.id}: ${errorMessage(err)}`);
        move.disabled = false;
      },
    );
  }, "primary move-confirm");
  move.disabled = true;
  const dialog = modal(
    `Move experiment ${e.id} (${e.name}) to a project`,
    notice.el,
    h("label", {}, "Workspace ", workspaceSelect),
    h("label", {}, "Project ", projectSelect),
    h("div", { class: "modal-buttons" }, button("Cancel", () => dialog.close()), move),
  );

  const loadProjects = async () => {
    projectSelect.disabled = move.disabled = true;
    try {
      const projects = (await api.workspaceProjects(Number(workspaceSelect.value))).filter((p) => !p.archived);
      replace(projectSelect, ...projects.map((p) => h("option", { value: String(p.id) }, p.name)));
      projectSelect.disabled = move.disabled = projects.length === 0;
      if (projects.length === 0) notice.info("This workspace has no projects.");
      else notice.clear();
    } catch (err) {
      notice.error(`Could not load the projects: ${errorMessage(err)}`);
    }
  };
  workspaceSelect.addEventListener("change", () => void loadProjects());
  notice.loading("Loading workspaces…");
  api.workspaces().then(
    (workspaces) => {
      const open = workspaces.filter((w) => !w.archived);
      replace(workspaceSelect, ...open.map((w) => h("option", { value: String(w.id) }, w.name)));
      workspaceSelect.disabled = false;
      void loadProjects();
    },
    (err: unknown) => notice.error(`Could not load the workspaces: ${errorMessage(err)}`),
  );
}

/** The "Move" button of an experiment's row or page. */
export function moveButton(e: Pick<Experiment, "id" | "name">, done: () => void): HTMLButtonElement {
  const b = button("move", () => openMoveDialog(e, done), "small action-move");
  b.title = "Move to project";
  b.addEventListener("click", (event) => event.stopPropagation());
  return b;
}
