// The model registry: every model (name, description, labels, versions, owner), and a model's
// page with its versions, each pointing at the checkpoint it holds and that checkpoint's
// validation metrics.

import { api, errorMessage } from "../api/client";
import type { Model, ModelVersion } from "../api/org";
import type { Page } from "../router";
import { h, link, replace } from "../ui/dom";
import { metric } from "../ui/format";
import { markdown } from "../ui/markdown";
import { Notice, section, Table } from "../ui/widgets";

function labels(list: readonly string[]): HTMLElement {
  return h("span", { class: "labels" }, ...list.map((l) => h("span", { class: "label-tag" }, l)));
}

const modelPath = (name: string) => `/models/${encodeURIComponent(name)}`;

export const modelsPage: Page = (root) => {
  const notice = new Notice();
  const table = new Table<Model>(
    [
      { title: "Name", cell: (m) => link(modelPath(m.name), m.name) },
      { title: "Description", cell: (m) => m.description },
      { title: "Labels", cell: (m) => labels(m.labels) },
      { title: "Versions", class: "num", cell: (m) => String(m.numVersions) },
      { title: "Owner", cell: (m) => m.username },
    ],
    { empty: "No models yet: register a checkpoint from an experiment's page.", rowKey: (m) => m.name, rowClass: (m) => (m.archived ? "archived" : "") },
  );
  const count = h("span", { class: "count" });
  replace(root, h("div", { class: "page-head" }, h("h1", {}, "Model registry"), count), notice.el, h("div", { class: "card table-wrap" }, table.el));
  let gone = false;
  notice.loading("Loading models…");
  api.models().then(
    (models) => {
      if (gone) return;
      notice.clear();
      count.textContent = `${models.length} total`;
      table.update(models);
    },
    (e: unknown) => {
      if (!gone) notice.error(`Could not load the models: ${errorMessage(e)}`);
    },
  );
  return () => {
    gone = true;
  };
};

/** A checkpoint's validation metrics, one `name: value` per line. */
function metrics(values: Record<string, unknown>): HTMLElement {
  const entries = Object.entries(values);
  if (!entries.length) return h("span", { class: "muted" }, "–");
  return h(
    "span",
    { class: "metrics" },
    ...entries.map(([k, v]) => h("div", {}, `${k}: `, typeof v === "number" ? metric(v) : String(v))),
  );
}

export const modelPage: Page = (root, params) => {
  const name = params.name ?? "";
  const notice = new Notice();
  const table = new Table<ModelVersion>(
    [
      { title: "Version", class: "num", cell: (v) => String(v.version) },
      { title: "Name", cell: (v) => v.name },
      {
        title: "Checkpoint",
        cell: (v) => link(`/trials/${v.checkpoint.trialId}`, h("code", { title: v.checkpoint.uuid }, v.checkpoint.uuid)),
      },
      { title: "Steps", class: "num", cell: (v) => String(v.checkpoint.stepsCompleted) },
      { title: "Metrics", cell: (v) => metrics(v.checkpoint.validationMetrics) },
      { title: "Notes", cell: (v) => h("div", { class: "version-notes" }, markdown(v.notes)) },
      { title: "Labels", cell: (v) => labels(v.labels) },
      { title: "Owner", cell: (v) => v.username },
    ],
    { empty: "No versions yet.", rowKey: (v) => String(v.version) },
  );
  const about = h("div", { class: "model-about" });
  replace(
    root,
    h("div", { class: "page-head" }, h("h1", {}, name), h("span", { class: "muted" }, link("/models", "Model registry"))),
    notice.el,
    about,
    section("Versions", h("div", { class: "table-wrap" }, table.el)),
  );
  let gone = false;
  notice.loading("Loading the model…");
  api.modelVersions(name).then(
    ({ model, versions }) => {
      if (gone) return;
      notice.clear();
      replace(
        about,
        h(
          "section",
          { class: "card" },
          model.description ? h("p", {}, model.description) : null,
          h("p", {}, "Labels: ", labels(model.labels), ` · owner ${model.username} · ${model.numVersions} versions`),
          model.notes ? h("div", { class: "notes-body" }, markdown(model.notes)) : null,
        ),
      );
      table.update(versions);
    },
    (e: unknown) => {
      if (!gone) notice.error(`Could not load model ${name}: ${errorMessage(e)}`);
    },
  );
  return () => {
    gone = true;
  };
};
