// The experiment page's view of its search: hyperparameters against the searcher metric in
// parallel coordinates (one line per trial, a warm start's imported trials dashed), the
// imported trials themselves, and for a multi-objective search its Pareto front.
// Mounted by experiment.ts: `el` goes on the page, `update` after each load.

import type { ExperimentDetail, ImportedTrial, JsonObject, Trial } from "../api/types";
import { type Row, paretoSvg, parallelAxes, parallelSvg, type ScatterPoint } from "../charts/parallel";
import { flattenHparams } from "../charts/shape";
import { h, link, replace } from "../ui/dom";
import { metric, value } from "../ui/format";
import { Notice, section, Table } from "../ui/widgets";

export class SearchView {
  readonly el: HTMLElement;
  private readonly notice = new Notice();
  private readonly plot = h("div", { class: "parallel-wrap" });
  private readonly importedWrap = h("div", { class: "table-wrap" });
  private readonly importedSection: HTMLElement;
  private readonly paretoNotice = new Notice();
  private readonly pareto = h("div", { class: "pareto-wrap" });
  private readonly paretoSection: HTMLElement;
  private readonly imported = new Table<ImportedTrial>(
    [
      { title: "Experiment", class: "num", cell: (i) => link(`/experiments/${i.sourceExperimentId}`, `#${i.sourceExperimentId}`) },
      { title: "Trial", class: "num", cell: (i) => link(`/trials/${i.sourceTrialId}`, String(i.sourceTrialId)) },
      { title: "Steps", class: "num", cell: (i) => String(i.stepsCompleted) },
      { title: "Best metric", class: "num", cell: (i) => metric(i.bestValidationMetric) },
      { title: "Hyperparameters", cell: (i) => hparamText(i.hparams) },
      { title: "Used", cell: (i) => i.note || "yes" },
    ],
    { empty: "", rowKey: (i) => `${i.sourceExperimentId}.${i.sourceTrialId}` },
  );

  constructor() {
    this.importedSection = section("Imported trials (warm start, not run here)", this.importedWrap);
    this.importedSection.hidden = true;
    replace(this.importedWrap, this.imported.el);
    this.paretoSection = section("Pareto front", this.paretoNotice.el, this.pareto);
    this.paretoSection.hidden = true;
    this.el = h(
      "div",
      { class: "search-view" },
      section("Hyperparameters in parallel", this.notice.el, this.plot),
      this.importedSection,
      this.paretoSection,
    );
  }

  update(detail: ExperimentDetail | null, trials: readonly Trial[]): void {
    if (!detail) return;
    const e = detail.experiment;
    const rows: Row[] = [];
    for (const t of trials) {
      if (t.bestValidationMetric !== null && Number.isFinite(t.bestValidationMetric)) {
        rows.push({ key: `trial ${t.id}`, hparams: t.hparams, metric: t.bestValidationMetric, imported: false });
      }
    }
    for (const i of detail.importedTrials) {
      if (i.bestValidationMetric !== null && Number.isFinite(i.bestValidationMetric)) {
        rows.push({ key: `imported trial ${i.sourceTrialId}`, hparams: i.hparams, metric: i.bestValidationMetric, imported: true });
      }
    }
    // A multi-objective search names its metrics in searcher.metrics; trials are ranked by the first.
    const metricName = e.searcherMetric || objectives(detail.config)[0] || "metric";
    if (rows.length === 0) {
      this.notice.info(`Shown once a trial reports a validation ${metricName}.`);
      replace(this.plot);
    } else {
      this.notice.clear();
      const axes = parallelAxes(rows, metricName, logHparams(detail.config));
      replace(this.plot, parallelSvg(rows, axes, e.smallerIsBetter));
    }
    this.importedSection.hidden = detail.importedTrials.length === 0;
    this.imported.update(detail.importedTrials);
    this.updatePareto(detail, trials);
  }

  private updatePareto(detail: ExperimentDetail, trials: readonly Trial[]): void {
    const goals = objectives(detail.config);
    this.paretoSection.hidden = goals.length < 2;
    if (goals.length < 2) return;
    const [xName, yName] = goals as [string, string];
    const front = new Set(detail.paretoFront);
    const points: ScatterPoint[] = [];
    for (const t of trials) {
      const x = t.latestValidation[xName];
      const y = t.latestValidation[yName];
      if (t.state === "COMPLETED" && typeof x === "number" && typeof y === "number") {
        points.push({ key: `trial ${t.id}`, x, y, front: front.has(t.id) });
      }
    }
    if (points.length === 0) {
      this.paretoNotice.info(`Shown once a trial completes with ${xName} and ${yName}.`);
      replace(this.pareto);
      return;
    }
    this.paretoNotice.clear();
    const note = goals.length > 2 ? h("p", { class: "muted" }, `The first two of ${goals.length} objectives; the front is over all of them.`) : null;
    replace(this.pareto, paretoSvg(points, xName, yName), note);
  }
}

function hparamText(hparams: JsonObject): string {
  return Object.entries(flattenHparams(hparams))
    .map(([k, v]) => `${k}=${value(v)}`)
    .join(", ");
}

/** Dotted names of the config's log-scale hyperparameters. */
function logHparams(config: JsonObject, prefix = "", out = new Set<string>()): Set<string> {
  const tree = (prefix ? config : config.hyperparameters) as JsonObject | undefined;
  if (!tree || typeof tree !== "object") return out;
  for (const [k, v] of Object.entries(tree)) {
    if (!v || typeof v !== "object" || Array.isArray(v)) continue;
    const spec = v as JsonObject;
    const name = prefix ? `${prefix}.${k}` : k;
    if (spec.type === "log") out.add(name);
    else if (spec.type === undefined) logHparams(spec, name, out);
  }
  return out;
}

/** The objectives of a multi-objective search (searcher.metrics), by name. */
function objectives(config: JsonObject): string[] {
  const searcher = config.searcher as JsonObject | undefined;
  const metrics = searcher?.metrics;
  if (!Array.isArray(metrics)) return [];
  return metrics.map((m) => String((m as JsonObject).name));
}
