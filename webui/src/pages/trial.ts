// One trial: summary, training and validation charts (metric choice, log scale, live),
// the full metric table with CSV export, checkpoints with metadata, and logs.

import { api, errorMessage } from "../api/client";
import { openStream } from "../api/stream";
import { type Checkpoint, isActive, type MetricReport, type Trial } from "../api/types";
import { flattenHparams, metricNames, toCsv } from "../charts/shape";
import type { Page } from "../router";
import { button, h, link, replace } from "../ui/dom";
import { bytes, duration, metric, time, value } from "../ui/format";
import { badge, Capped, coalesce, debounce, Notice, section, Table } from "../ui/widgets";
import { LogView } from "./logView";
import { MetricPanel } from "./metricPanel";
import { registerCell } from "./registerDialog";

const TABLE_PAGE = 25;
// Charts first get about this many reports per group (a first view); all of them follow.
const FIRST_VIEW_POINTS = 2000;

export const trialPage: Page = (root, params, ctx) => {
  const id = Number(params.id);
  // Ask for the data before building the page (charts take a moment to set up).
  let early: Promise<MetricReport[]> | null = api.trialMetrics(id, { maxPoints: FIRST_VIEW_POINTS });
  early.catch(() => {}); // handled where it is awaited
  const notice = new Notice();
  const head = h("div", { class: "page-head" });
  const summary = h("dl", { class: "summary" });
  let searcherMetric = "";
  const training = new MetricPanel("training", "Training metrics", ["loss"]);
  const validation = new MetricPanel("validation", "Validation metrics", ["validation_loss", "loss"]);
  const panels = new Map([
    ["training", training],
    ["validation", validation],
  ]);
  const logs = new LogView(id);
  const table = new MetricTable(() => all);
  const checkpoints = new Table<Checkpoint>(
    [
      { title: "UUID", cell: (c) => h("code", {}, c.uuid) },
      { title: "Steps", class: "num", cell: (c) => String(c.stepsCompleted) },
      { title: "Metric", class: "num", cell: (c) => metric(c.searcherMetric) },
      { title: "Size", class: "num", cell: (c) => bytes(c.size) },
      { title: "Files", class: "num", cell: (c) => String(Object.keys(c.resources).length) },
      { title: "State", cell: (c) => c.state },
      { title: "Reported", cell: (c) => time(c.reportTime) },
      {
        title: "Metadata",
        cell: (c) => h("details", {}, h("summary", {}, `${Object.keys(c.metadata).length} keys`), h("pre", {}, JSON.stringify(c.metadata, null, 2))),
      },
      { title: "Registry", cell: (c) => registerCell(c, (m) => checkpointNotice.info(m)) },
    ],
    { empty: "No checkpoints yet." },
  );
  const checkpointList = new Capped(checkpoints, 10);
  const actionNotice = new Notice();
  const checkpointNotice = new Notice();

  // Hidden until the trial loads: a wrong id shows one message, not empty sections.
  const body = h(
    "div",
    { hidden: true },
    h("section", { class: "card" }, summary),
    h("div", { class: "charts" }, training.el, validation.el),
    section("Metric reports", table.el),
    section("Checkpoints", checkpointNotice.el, checkpointList.el),
    logs.el,
  );
  replace(root, head, notice.el, actionNotice.el, body);

  let trial: Trial | null = null;
  // Every report, once loaded (null while only the charts' first view is there).
  let all: MetricReport[] | null = null;

  const renderHead = (t: Trial) => {
    const active = isActive(t.state) || t.state === "PAUSED";
    replace(
      head,
      h("h1", {}, `Trial ${t.id} `, h("span", { class: "muted" }, "of "), link(`/experiments/${t.experimentId}`, `experiment ${t.experimentId}`)),
      badge(t.state),
      h("span", { class: "spacer" }),
      t.latestCheckpointUuid ? link(`/trials/${t.id}/continue`, "Continue trial") : null,
      active &&
        button("Kill", () => {
          if (!window.confirm(`Kill trial ${t.id}?`)) return;
          api.killTrial(t.id).then(
            () => void refreshTrial(),
            (e: unknown) => actionNotice.error(`Could not kill trial ${t.id}: ${errorMessage(e)}`),
          );
        }, "danger small"),
    );
    const item = (k: string, v: Node | string) => [h("div", {}, h("dt", {}, k), h("dd", {}, v))];
    const hp = flattenHparams(t.hparams);
    replace(
      summary,
      ...item("Steps completed", String(t.totalBatchesProcessed)),
      ...item(`Best ${searcherMetric || "validation"}`, metric(t.bestValidationMetric)),
      ...item("Restarts", String(t.restarts)),
      ...item("Started", time(t.startTime)),
      ...item("Duration", duration(t.startTime, t.endTime)),
      ...item("Seed", String(t.seed)),
      ...(t.earlyExit ? item("Early exit", t.earlyExit) : []),
      ...(t.warmStartCheckpointUuid ? item("Warm start checkpoint", t.warmStartCheckpointUuid) : []),
      ...(t.parentTrialId != null ? item("Parent trial", link(`/trials/${t.parentTrialId}`, `#${t.parentTrialId}`)) : []),
      ...Object.entries(hp).flatMap(([k, v]) => item(k, value(v))),
    );
  };

  const refreshTrial = coalesce(async () => {
    try {
      trial = await api.trial(id);
      notice.clear();
      renderHead(trial);
    } catch (e) {
      notice.error(`Could not load trial ${id}: ${errorMessage(e)}`);
    }
  });

  const refreshCheckpoints = coalesce(async () => {
    try {
      checkpointList.update((await api.trialCheckpoints(id)).reverse());
      checkpointNotice.clear();
    } catch (e) {
      checkpointNotice.error(`Could not load the checkpoints: ${errorMessage(e)}`);
    }
  });

  const byGroup = (reports: MetricReport[], group: string) => reports.filter((r) => r.group === group);
  const loadAllMetrics = coalesce(async () => {
    try {
      const pending = early ?? api.trialMetrics(id, { maxPoints: FIRST_VIEW_POINTS });
      early = null;
      const first = await pending;
      const thinned = [...panels.keys()].some((g) => byGroup(first, g).length >= FIRST_VIEW_POINTS);
      for (const [group, panel] of panels) panel.setReports(byGroup(first, group), thinned);
      if (thinned) {
        all = null;
        table.render();
        // Give the browser a frame to paint the first view before the big parse.
        await new Promise((resolve) => setTimeout(resolve, 0));
        const full = await api.trialMetrics(id);
        for (const [group, panel] of panels) panel.setReports(byGroup(full, group));
        all = full;
        // Reports that came while the full list loaded are fetched now.
        for (const group of panels.keys()) pendingGroups.add(group);
        void appendMetrics();
      } else {
        all = first;
      }
      table.render();
    } catch (e) {
      for (const panel of panels.values()) panel.fail(`Could not load metrics: ${errorMessage(e)}`);
    }
  });

  const pendingGroups = new Set<string>();
  const appendMetrics = coalesce(async () => {
    const groups = [...pendingGroups];
    pendingGroups.clear();
    try {
      for (const group of groups) {
        const panel = panels.get(group);
        const last = panel ? panel.lastStep : undefined;
        const got = await api.trialMetrics(id, { group, afterSteps: last });
        panel?.append(got);
        if (all) all = all.concat(got);
      }
      table.render();
    } catch (e) {
      actionNotice.error(`Could not load new metrics: ${errorMessage(e)}`);
    }
  });

  notice.loading(`Loading trial ${id}…`);
  // Everything is fetched at once; the body shows when the trial itself has loaded.
  void loadAllMetrics();
  void refreshCheckpoints();
  logs.start();
  void refreshTrial().then(async () => {
    if (!trial) return;
    body.hidden = false;
    try {
      searcherMetric = (await api.experiment(trial.experimentId)).experiment.searcherMetric;
      validation.prefer(searcherMetric);
      if (trial) renderHead(trial);
    } catch {
      // The summary just says "validation" then.
    }
  });

  const liveTrial = debounce(() => {
    void refreshTrial();
    void refreshCheckpoints();
  }, 200);
  const stream = openStream(
    { trialId: id },
    {
      trial: liveTrial,
      metrics: (e) => {
        for (const g of e.groups.length ? e.groups : ["training", "validation"]) pendingGroups.add(g);
        void appendMetrics();
        liveTrial();
      },
      logs: () => logs.onNewLines(),
      resync: () => {
        void refreshTrial();
        void loadAllMetrics();
        void refreshCheckpoints();
        logs.onNewLines();
      },
      status: ctx.setLive,
    },
  );

  return () => {
    stream.close();
    liveTrial.cancel();
    logs.dispose();
    for (const panel of panels.values()) panel.destroy();
  };
};

/** Every report, a page at a time (charts are downsampled; this keeps the full data). */
class MetricTable {
  readonly el: HTMLElement;
  private page = 0;
  private readonly wrap = h("div", { class: "table-wrap" });
  private readonly info = h("span", { class: "page-info" });
  private readonly group = h("select", {}, h("option", { value: "" }, "All groups"));
  private readonly prev = button("‹ Prev", () => this.go(this.page - 1), "small");
  private readonly next = button("Next ›", () => this.go(this.page + 1), "small");
  private groups = "";

  constructor(private readonly reports: () => MetricReport[] | null) {
    this.group.addEventListener("change", () => this.go(0));
    this.el = h(
      "div",
      { class: "metric-table" },
      h(
        "div",
        { class: "toolbar" },
        this.group,
        h("span", { class: "spacer" }),
        this.prev,
        this.info,
        this.next,
        button("Export CSV", () => this.export(), "small"),
      ),
      this.wrap,
    );
  }

  render(): void {
    const all = this.reports();
    if (all === null) {
      replace(this.wrap, h("div", { class: "notice loading" }, h("span", { class: "spinner" }), "Loading all reports…"));
      delete this.el.dataset.total;
      return;
    }
    const groups = [...new Set(all.map((r) => r.group))].sort();
    if (groups.join() !== this.groups) {
      this.groups = groups.join();
      const chosen = this.group.value;
      replace(this.group, h("option", { value: "" }, "All groups"), ...groups.map((g) => h("option", { value: g }, g)));
      this.group.value = groups.includes(chosen) ? chosen : "";
    }
    const rows = this.rows();
    const pages = Math.max(1, Math.ceil(rows.length / TABLE_PAGE));
    this.page = Math.min(this.page, pages - 1);
    const slice = rows.slice(this.page * TABLE_PAGE, (this.page + 1) * TABLE_PAGE);
    const names = metricNames(slice);
    const table = new Table<MetricReport>(
      [
        { title: "Group", cell: (r) => r.group },
        { title: "Steps", class: "num", cell: (r) => String(r.stepsCompleted) },
        ...names.map((n) => ({ title: n, class: "num", cell: (r: MetricReport) => (n in r.metrics ? value(r.metrics[n]) : "") })),
        { title: "Time", cell: (r) => time(r.timestamp) },
      ],
      { empty: "No metrics reported yet." },
    );
    table.update(slice);
    replace(this.wrap, table.el);
    this.info.textContent = rows.length
      ? `${this.page * TABLE_PAGE + 1}–${this.page * TABLE_PAGE + slice.length} of ${rows.length}`
      : "0 of 0";
    this.prev.disabled = this.page === 0;
    this.next.disabled = this.page >= pages - 1;
    this.el.dataset.total = String(all.length);
  }

  private rows(): MetricReport[] {
    const g = this.group.value;
    const all = this.reports() ?? [];
    return g ? all.filter((r) => r.group === g) : all;
  }

  private go(page: number): void {
    this.page = Math.max(0, page);
    this.render();
  }

  private export(): void {
    const url = URL.createObjectURL(new Blob([toCsv(this.rows())], { type: "text/csv" }));
    const a = h("a", { href: url });
    a.download = "metrics.csv";
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }
}
