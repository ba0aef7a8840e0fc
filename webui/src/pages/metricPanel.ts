// One metric group of a trial (training or validation): choose metrics, log scale, and a
// chart that is made once and fed with `setData` as reports arrive.

import type { MetricReport } from "../api/types";
import { Chart } from "../charts/chart";
import { align, downsample, metricNames, metricSeries } from "../charts/shape";
import { h, replace } from "../ui/dom";
import { Notice } from "../ui/widgets";

export class MetricPanel {
  readonly el: HTMLElement;
  private readonly chart: Chart;
  private readonly chooser = h("div", { class: "chooser" });
  private readonly notice = new Notice();
  private reports: MetricReport[] = [];
  private names: string[] = [];
  private chosen = new Set<string>();
  private touched = false;
  private partial = false;

  constructor(
    readonly group: string,
    title: string,
    private preferred: string[],
  ) {
    this.chart = new Chart({ xLabel: "steps" });
    const logBox = h("input", { type: "checkbox", class: "log-scale" });
    logBox.addEventListener("change", () => this.chart.setLog(logBox.checked));
    this.el = h(
      "section",
      { class: "card metric-panel", data: { group } },
      h("div", { class: "card-head" }, h("h2", {}, title), h("label", { class: "check" }, logBox, "Log scale")),
      this.chooser,
      this.notice.el,
      this.chart.el,
    );
    this.notice.loading("Loading metrics…");
  }

  get count(): number {
    return this.reports.length;
  }

  get lastStep(): number | undefined {
    return this.reports[this.reports.length - 1]?.stepsCompleted;
  }

  /** `partial`: a thinned first view; all reports follow. */
  setReports(reports: MetricReport[], partial = false): void {
    this.reports = reports;
    this.partial = partial;
    this.refresh();
  }

  append(reports: MetricReport[]): void {
    if (reports.length === 0) return;
    this.reports = this.reports.concat(reports);
    this.refresh();
  }

  /** Show this metric first unless the user already chose. */
  prefer(name: string): void {
    if (this.touched || !name) return;
    this.preferred = [name, ...this.preferred];
    this.names = [];
    this.refresh();
  }

  fail(message: string): void {
    this.notice.error(message);
  }

  destroy(): void {
    this.chart.destroy();
  }

  private refresh(): void {
    const names = metricNames(this.reports);
    if (names.join() !== this.names.join()) {
      this.names = names;
      if (!this.touched) {
        const preferred = this.preferred.filter((n) => names.includes(n));
        this.chosen = new Set(preferred.length ? preferred.slice(0, 1) : names.slice(0, 1));
      }
      this.renderChooser();
    }
    if (this.reports.length === 0) this.notice.info(`No ${this.group} metrics reported yet.`);
    else if (this.partial) this.notice.loading("Showing a sample of the reports; loading all of them…");
    else this.notice.clear();
    this.draw();
  }

  private renderChooser(): void {
    replace(
      this.chooser,
      ...this.names.map((name) => {
        const box = h("input", { type: "checkbox", checked: this.chosen.has(name), value: name });
        box.addEventListener("change", () => {
          this.touched = true;
          if (box.checked) this.chosen.add(name);
          else this.chosen.delete(name);
          this.draw();
        });
        return h("label", { class: "check chip" }, box, name);
      }),
    );
  }

  private draw(): void {
    const chosen = this.names.filter((n) => this.chosen.has(n));
    const series = chosen.map((n) => downsample(metricSeries(this.reports, n)));
    this.chart.setData(chosen, series.length ? align(series) : [[]]);
  }
}
