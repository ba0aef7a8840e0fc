// One experiment: summary, the searcher metric of every trial over steps, the metric
// against each hyperparameter, trials, checkpoints and the config. Live.

import { api, errorMessage } from "../api/client";
import { openStream } from "../api/stream";
import { type Checkpoint, type ExperimentDetail, isActive, type MetricReport, type Trial } from "../api/types";
import { Chart } from "../charts/chart";
import { align, downsample, flattenHparams, hparamScatter, metricSeries } from "../charts/shape";
import type { Page } from "../router";
import { button, h, link, replace } from "../ui/dom";
import { bytes, duration, metric, stateLabel, time, value } from "../ui/format";
import { badge, Capped, coalesce, debounce, Notice, progress, section, Table, unmanagedTag } from "../ui/widgets";
import { actionButtons } from "./actions";
import { moveButton } from "./moveDialog";
import { registerCell } from "./registerDialog";
import { SearchView } from "./searchView";
import { tensorboardButton } from "./tensorboard";

export const experimentPage: Page = (root, params, ctx) => {
  const id = Number(params.id);
  const notice = new Notice();
  const actionNotice = new Notice();
  const head = h("div", { class: "page-head" });
  const summary = h("dl", { class: "summary" });
  const chartNotice = new Notice();
  const chart = new Chart({ xLabel: "steps", yLabel: "" });
  const logBox = h("input", { type: "checkbox" });
  logBox.addEventListener("change", () => chart.setLog(logBox.checked));
  const hpNotice = new Notice();
  const hpGrid = h("div", { class: "hp-grid" });
  const hpCharts = new Map<string, Chart>();
  const searchView = new SearchView();
  const trialsWrap = h("div", { class: "table-wrap" });
  const checkpoints = new Table<Checkpoint>(
    [
      { title: "UUID", cell: (c) => h("code", { title: c.uuid }, c.uuid.slice(0, 8)) },
      { title: "Trial", class: "num", cell: (c) => link(`/trials/${c.trialId}`, String(c.trialId)) },
      { title: "Steps", class: "num", cell: (c) => String(c.stepsCompleted) },
      { title: "Metric", class: "num", cell: (c) => metric(c.searcherMetric) },
      { title: "Size", class: "num", cell: (c) => bytes(c.size) },
      { title: "State", cell: (c) => c.state },
      { title: "Reported", cell: (c) => time(c.reportTime) },
      { title: "Registry", cell: (c) => registerCell(c, (m) => actionNotice.info(m)) },
    ],
    { empty: "No checkpoints yet.", rowKey: (c) => c.uuid },
  );
  const checkpointList = new Capped(checkpoints, 10);
  const config = h("pre", { class: "config" });
  const original = h("pre", { class: "config" });

  // Hidden until the experiment loads: a wrong id shows one message, not empty sections.
  const body = h(
    "div",
    { hidden: true },
    h("section", { class: "card" }, summary),
    h(
      "section",
      { class: "card" },
      h("div", { class: "card-head" }, h("h2", { class: "chart-title" }, "Searcher metric"), h("label", { class: "check" }, logBox, "Log scale")),
      chartNotice.el,
      chart.el,
    ),
    section("Hyperparameters", hpNotice.el, hpGrid),
    searchView.el,
    section("Trials", trialsWrap),
    section("Checkpoints", checkpointList.el),
    section(
      "Configuration",
      h("details", { open: true }, h("summary", {}, "As submitted"), original),
      h("details", {}, h("summary", {}, "With defaults filled in"), config),
    ),
  );
  replace(root, head, notice.el, actionNotice.el, body);

  let detail: ExperimentDetail | null = null;
  let trials: Trial[] = [];
  const metrics = new Map<number, MetricReport[]>();
  let trialsTable: Table<Trial> | null = null;
  let hpNames: string[] = [];
  let hasParents = false;

  const renderHead = () => {
    if (!detail) return;
    const e = detail.experiment;
    const del = e.state === "COMPLETED" || e.state === "CANCELED" || e.state === "ERROR";
    replace(
      head,
      h("h1", {}, `${e.name} `, h("span", { class: "muted" }, `#${e.id}`)),
      badge(e.state),
      unmanagedTag(e.unmanaged),
      h("span", { class: "spacer" }),
      actionButtons(e, (m) => actionNotice.error(m), () => {
        actionNotice.clear();
        refreshAll();
      }),
      tensorboardButton(e.id, (m) => actionNotice.error(m)),
      moveButton(e, () => actionNotice.info(`Moved experiment ${e.id}.`)),
      link(`/experiments/${e.id}/fork`, "Fork"),
      del &&
        button("Delete", () => {
          if (!window.confirm(`Delete experiment ${e.id} with its trials, metrics and checkpoints?`)) return;
          api.deleteExperiment(e.id).then(
            () => ctx.navigate("/experiments"),
            (err: unknown) => actionNotice.error(`Could not delete: ${errorMessage(err)}`),
          );
        }, "danger small"),
    );
    const item = (k: string, v: Node | string) => [h("div", {}, h("dt", {}, k), h("dd", {}, v))];
    replace(
      summary,
      ...item("Searcher", `${e.searcherType} on ${e.searcherMetric} (${e.smallerIsBetter ? "smaller" : "larger"} is better)`),
      ...item("Best metric", metric(e.bestTrialSearcherMetric)),
      ...item("Progress", progress(e.progress)),
      ...item("Trials", String(e.numTrials)),
      ...item("User", e.username),
      ...item("Started", time(e.startTime)),
      ...item("Duration", duration(e.startTime, e.endTime)),
      ...item("Resource pool", e.resourcePool),
      ...item("Job", e.jobId),
      ...(e.forkedFrom ? item("Forked from", link(`/experiments/${e.forkedFrom}`, `#${e.forkedFrom}`)) : []),
      ...(e.description ? item("Description", e.description) : []),
    );
    (root.querySelector(".chart-title") as HTMLElement).textContent = `Validation ${e.searcherMetric} by trial`;
  };

  const renderTrials = () => {
    const names = [...new Set(trials.flatMap((t) => Object.keys(flattenHparams(t.hparams))))].sort();
    // A PBT search's children name their parent: the column shows once one exists.
    const forked = trials.some((t) => t.parentTrialId != null);
    if (!trialsTable || names.join() !== hpNames.join() || forked !== hasParents) {
      hpNames = names;
      hasParents = forked;
      trialsTable = new Table<Trial>(
        [
          { title: "ID", class: "num", cell: (t) => link(`/trials/${t.id}`, String(t.id)) },
          { title: "State", cell: (t) => badge(t.state) },
          { title: "Phase", class: "phase", cell: (t) => h("span", { data: { phase: t.phase } }, stateLabel(t.phase)) },
          ...(forked
            ? [{ title: "Parent", class: "num", cell: (t: Trial) => (t.parentTrialId != null ? link(`/trials/${t.parentTrialId}`, String(t.parentTrialId)) : "–") }]
            : []),
          ...names.map((n) => ({ title: n, class: "hp", cell: (t: Trial) => value(flattenHparams(t.hparams)[n]) })),
          { title: "Steps completed", class: "num", cell: (t) => String(t.totalBatchesProcessed) },
          { title: "Best metric", class: "num", cell: (t) => metric(t.bestValidationMetric) },
          { title: "Restarts", class: "num", cell: (t) => String(t.restarts) },
          { title: "Checkpoint", cell: (t) => (t.latestCheckpointUuid ? h("code", {}, t.latestCheckpointUuid.slice(0, 8)) : "–") },
          {
            title: "",
            cell: (t) =>
              h(
                "span",
                { class: "actions" },
                t.latestCheckpointUuid ? link(`/trials/${t.id}/continue`, "Continue") : null,
                isActive(t.state) || t.state === "PAUSED"
                  ? button("Kill", () => {
                      if (window.confirm(`Kill trial ${t.id}?`)) {
                        api.killTrial(t.id).then(refreshTrials, (err: unknown) => actionNotice.error(`Could not kill trial ${t.id}: ${errorMessage(err)}`));
                      }
                    }, "small")
                  : null,
              ),
          },
        ],
        { empty: "No trials yet.", rowKey: (t) => String(t.id) },
      );
      replace(trialsWrap, trialsTable.el);
    }
    trialsTable.update(trials);
  };

  const renderChart = () => {
    if (!detail) return;
    const name = detail.experiment.searcherMetric;
    const withData = trials
      .map((t) => ({ t, s: downsample(metricSeries(metrics.get(t.id) ?? [], name), 1000) }))
      .filter(({ s }) => s.x.length > 0);
    if (withData.length === 0) chartNotice.info(`No validation ${name} reported yet.`);
    else chartNotice.clear();
    chart.setData(
      withData.map(({ t }) => `trial ${t.id}`),
      withData.length ? align(withData.map(({ s }) => s)) : [[]],
    );
  };

  const renderHparams = () => {
    const points = hparamScatter(trials.map((t) => ({ hparams: t.hparams, metric: t.bestValidationMetric })));
    if (points.length === 0) {
      hpNotice.info("Shown once two or more trials with different hyperparameters report a validation metric.");
    } else hpNotice.clear();
    const seen = new Set<string>();
    for (const p of points) {
      seen.add(p.name);
      let c = hpCharts.get(p.name);
      if (!c) {
        c = new Chart({ xLabel: p.name, yLabel: detail?.experiment.searcherMetric ?? "", scatter: true, height: 220, xNames: p.labels });
        hpCharts.set(p.name, c);
        hpGrid.appendChild(h("div", { class: "hp-chart" }, c.el));
      }
      c.setData([detail?.experiment.searcherMetric ?? "metric"], p.data);
    }
    for (const [name, c] of hpCharts) {
      if (!seen.has(name)) {
        c.el.parentElement?.remove();
        c.destroy();
        hpCharts.delete(name);
      }
    }
  };

  const loadTrialMetrics = async (trialId: number, append: boolean) => {
    const have = metrics.get(trialId) ?? [];
    const after = append && have.length ? (have[have.length - 1] as MetricReport).stepsCompleted : undefined;
    const got = await api.trialMetrics(trialId, { group: "validation", afterSteps: after });
    metrics.set(trialId, append ? have.concat(got) : got);
  };

  const refreshExperiment = coalesce(async () => {
    try {
      detail = await api.experiment(id);
      notice.clear();
      renderHead();
      const filled = detail.config;
      void import("../ui/yaml").then((m) => {
        config.textContent = m.toYaml(filled);
      });
      original.textContent = detail.originalConfig;
    } catch (e) {
      notice.error(`Could not load experiment ${id}: ${errorMessage(e)}`);
    }
  });

  const refreshTrials = coalesce(async () => {
    try {
      trials = await api.experimentTrials(id);
      renderTrials();
      renderHparams();
      searchView.update(detail, trials);
    } catch (e) {
      notice.error(`Could not load the trials: ${errorMessage(e)}`);
    }
  });

  const refreshCheckpoints = coalesce(async () => {
    try {
      checkpointList.update((await api.experimentCheckpoints(id)).reverse());
    } catch (e) {
      notice.error(`Could not load the checkpoints: ${errorMessage(e)}`);
    }
  });

  const refreshMetrics = coalesce(async () => {
    try {
      const queue = trials.map((t) => t.id);
      const worker = async () => {
        for (let next = queue.shift(); next !== undefined; next = queue.shift()) await loadTrialMetrics(next, false);
      };
      await Promise.all([worker(), worker(), worker(), worker()]);
      renderChart();
    } catch (e) {
      chartNotice.error(`Could not load metrics: ${errorMessage(e)}`);
    }
  });

  const pendingTrials = new Set<number>();
  const appendMetrics = debounce(() => {
    const ids = [...pendingTrials];
    pendingTrials.clear();
    Promise.all(ids.map((t) => loadTrialMetrics(t, true))).then(renderChart, (e: unknown) =>
      chartNotice.error(`Could not load metrics: ${errorMessage(e)}`),
    );
  }, 300);

  function refreshAll(): void {
    void Promise.all([refreshExperiment(), refreshTrials(), refreshCheckpoints()]).then(() => refreshMetrics());
  }

  notice.loading(`Loading experiment ${id}…`);
  void refreshExperiment().then(() => {
    if (!detail) return;
    body.hidden = false;
    void Promise.all([refreshTrials(), refreshCheckpoints()]).then(() => refreshMetrics());
  });

  const liveExperiment = debounce(() => {
    refreshExperiment();
    refreshCheckpoints();
  }, 200);
  const liveTrials = debounce(refreshTrials, 200);
  const stream = openStream(
    { experimentId: id },
    {
      experiment: liveExperiment,
      trial: () => {
        liveTrials();
        liveExperiment();
      },
      metrics: (e) => {
        if (e.groups.length === 0 || e.groups.includes("validation")) {
          pendingTrials.add(e.trialId);
          appendMetrics();
          liveTrials();
        }
      },
      resync: refreshAll,
      status: ctx.setLive,
    },
  );
  return () => {
    stream.close();
    liveExperiment.cancel();
    liveTrials.cancel();
    appendMetrics.cancel();
    chart.destroy();
    for (const c of hpCharts.values()) c.destroy();
  };
};
