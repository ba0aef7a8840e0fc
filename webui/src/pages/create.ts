// Create from existing: fork an experiment with an edited config, or continue a trial
// from its latest checkpoint. The master reuses the parent experiment's context directory.

import { api, errorMessage } from "../api/client";
import type { Page } from "../router";
import { h, link, replace } from "../ui/dom";
import { Notice } from "../ui/widgets";
import { continueConfig, forkConfig } from "./newConfig";

export const forkPage: Page = (root, params, ctx) => {
  const id = Number(params.id);
  const form = new CreateForm(root, ctx.navigate, `Fork experiment ${id}`, link(`/experiments/${id}`, `back to experiment ${id}`));
  form.notice.loading("Loading the config…");
  api.experiment(id).then(
    (d) => form.ready(forkConfig(d.originalConfig, d.experiment), id),
    (e: unknown) => form.notice.error(`Could not load experiment ${id}: ${errorMessage(e)}`),
  );
  return () => {};
};

export const continuePage: Page = (root, params, ctx) => {
  const id = Number(params.id);
  const form = new CreateForm(root, ctx.navigate, `Continue trial ${id}`, link(`/trials/${id}`, `back to trial ${id}`));
  form.notice.loading("Loading the trial…");
  (async () => {
    const trial = await api.trial(id);
    const d = await api.experiment(trial.experimentId);
    if (!trial.latestCheckpointUuid) {
      form.notice.info(`Trial ${id} has no checkpoint yet; the new trial will start from scratch.`);
    }
    form.ready(continueConfig(d.originalConfig, d.config, trial, d.experiment.name), trial.experimentId);
  })().catch((e: unknown) => form.notice.error(`Could not load trial ${id}: ${errorMessage(e)}`));
  return () => {};
};

class CreateForm {
  readonly notice = new Notice();
  private readonly editor = h("textarea", { class: "config-editor", rows: 24, spellcheck: false, disabled: true });
  private readonly activate = h("input", { type: "checkbox", checked: true });
  private readonly submit = h("button", { type: "submit", class: "primary", disabled: true }, "Create experiment");
  private parent = 0;

  constructor(root: HTMLElement, navigate: (path: string) => void, title: string, back: HTMLElement) {
    const form = h(
      "form",
      { class: "card create-form" },
      h("p", { class: "muted" }, "Edit the configuration (YAML). The new experiment uses the parent experiment's code."),
      this.editor,
      h("div", { class: "buttons" }, h("label", { class: "check" }, this.activate, "Start it now"), h("span", { class: "spacer" }), this.submit),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit.disabled = true;
      this.notice.loading("Creating…");
      api.createExperiment({ config: this.editor.value, parentId: this.parent, activate: this.activate.checked }).then(
        (r) => navigate(`/experiments/${r.experiment.id}`),
        (e: unknown) => {
          this.submit.disabled = false;
          this.notice.error(`Could not create the experiment: ${errorMessage(e)}`);
        },
      );
    });
    replace(root, h("div", { class: "page-head" }, h("h1", {}, title), h("span", { class: "spacer" }), back), this.notice.el, form);
  }

  ready(config: string, parent: number): void {
    this.parent = parent;
    this.editor.value = config;
    this.editor.disabled = false;
    this.submit.disabled = false;
    if (!this.notice.el.classList.contains("info")) this.notice.clear();
  }
}
