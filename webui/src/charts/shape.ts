// Shaping metric data for charts: pure functions, no DOM, unit-tested.
//
// Charts get at most a few thousand points per series (min/max per bucket, so spikes stay
// visible); tables and exports keep the full data.

import type { JsonObject, MetricReport } from "../api/types";

export interface XY {
  x: number[];
  y: (number | null)[];
}

/** uPlot's aligned data: one shared x array, then one y array per series. */
export type Aligned = [number[], ...(number | null)[][]];

export const MAX_CHART_POINTS = 2000;

function numeric(v: unknown): number | null {
  if (typeof v === "number" && Number.isFinite(v)) return v;
  return null;
}

/** Names of the metrics with at least one finite number in `reports`, sorted. */
export function metricNames(reports: readonly MetricReport[]): string[] {
  const names = new Set<string>();
  for (const r of reports) {
    const m = r.metrics;
    for (const k in m) if (!names.has(k) && numeric(m[k]) !== null) names.add(k);
  }
  return [...names].sort();
}

/** One metric over steps; reports without a number for it are skipped. Sorted by step. */
export function metricSeries(reports: readonly MetricReport[], name: string): XY {
  const x: number[] = [];
  const y: number[] = [];
  let sorted = true;
  for (const r of reports) {
    const v = numeric(r.metrics[name]);
    if (v === null) continue;
    const last = x[x.length - 1];
    if (last !== undefined && r.stepsCompleted < last) sorted = false;
    x.push(r.stepsCompleted);
    y.push(v);
  }
  if (sorted) return { x, y };
  const order = x.map((_, i) => i).sort((a, b) => (x[a] as number) - (x[b] as number));
  return { x: order.map((i) => x[i] as number), y: order.map((i) => y[i] as number) };
}

/**
 * At most `max` points: the range is cut into max/2 buckets and each keeps its lowest and
 * highest point, in step order. The first and last points are always kept.
 */
export function downsample(series: XY, max = MAX_CHART_POINTS): XY {
  const n = series.x.length;
  if (n <= max) return series;
  const buckets = Math.max(1, Math.floor((max - 2) / 2));
  const size = (n - 2) / buckets;
  const x: number[] = [series.x[0] as number];
  const y: (number | null)[] = [series.y[0] ?? null];
  for (let b = 0; b < buckets; b++) {
    const start = 1 + Math.floor(b * size);
    const end = Math.min(n - 1, 1 + Math.floor((b + 1) * size));
    let lo = -1;
    let hi = -1;
    for (let i = start; i < end; i++) {
      const v = series.y[i];
      if (v === null || v === undefined) continue;
      if (lo < 0 || v < (series.y[lo] as number)) lo = i;
      if (hi < 0 || v > (series.y[hi] as number)) hi = i;
    }
    if (lo < 0) continue;
    const first = Math.min(lo, hi);
    const second = Math.max(lo, hi);
    x.push(series.x[first] as number);
    y.push(series.y[first] ?? null);
    if (second !== first) {
      x.push(series.x[second] as number);
      y.push(series.y[second] ?? null);
    }
  }
  x.push(series.x[n - 1] as number);
  y.push(series.y[n - 1] ?? null);
  return { x, y };
}

/** Several series on one x axis (the union of their steps); gaps are null. */
export function align(series: readonly XY[]): Aligned {
  if (series.length === 1) {
    const only = series[0] as XY;
    return [only.x.slice(), only.y.slice()];
  }
  const xs = new Set<number>();
  for (const s of series) for (const x of s.x) xs.add(x);
  const x = [...xs].sort((a, b) => a - b);
  const index = new Map<number, number>();
  x.forEach((v, i) => index.set(v, i));
  const ys = series.map((s) => {
    const y = new Array<number | null>(x.length).fill(null);
    s.x.forEach((v, i) => {
      y[index.get(v) as number] = s.y[i] ?? null;
    });
    return y;
  });
  return [x, ...ys];
}

/** For a log scale: log10 of positive values; zero and negatives cannot be drawn. */
export function log10(y: readonly (number | null)[]): (number | null)[] {
  return y.map((v) => (v !== null && v > 0 ? Math.log10(v) : null));
}

/** Nested hyperparameter groups as dotted names: {optimizer: {lr: 1}} → {"optimizer.lr": 1}. */
export function flattenHparams(hparams: JsonObject, prefix = ""): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(hparams)) {
    const name = prefix ? `${prefix}.${k}` : k;
    if (typeof v === "object" && v !== null && !Array.isArray(v)) {
      Object.assign(out, flattenHparams(v as JsonObject, name));
    } else {
      out[name] = v;
    }
  }
  return out;
}

export interface HparamPoints {
  name: string;
  /** Categorical values are placed at 0, 1, 2, … and labelled. */
  labels: string[] | null;
  data: Aligned;
}

/** The searcher metric against each hyperparameter that varies between trials. */
export function hparamScatter(
  trials: readonly { hparams: JsonObject; metric: number | null }[],
): HparamPoints[] {
  const rows = trials
    .filter((t): t is { hparams: JsonObject; metric: number } => t.metric !== null && Number.isFinite(t.metric))
    .map((t) => ({ hp: flattenHparams(t.hparams), metric: t.metric }));
  const names = [...new Set(rows.flatMap((r) => Object.keys(r.hp)))].sort();
  const out: HparamPoints[] = [];
  for (const name of names) {
    const values = rows.map((r) => r.hp[name] ?? null);
    const distinct = new Set(values.map((v) => JSON.stringify(v)));
    if (distinct.size < 2) continue;
    const allNumbers = values.every((v) => typeof v === "number");
    let labels: string[] | null = null;
    let xs: number[];
    if (allNumbers) {
      xs = values as number[];
    } else {
      labels = [...distinct].sort();
      xs = values.map((v) => (labels as string[]).indexOf(JSON.stringify(v)));
      labels = labels.map((l) => {
        const parsed: unknown = JSON.parse(l);
        return typeof parsed === "string" ? parsed : l;
      });
    }
    const order = xs.map((_, i) => i).sort((a, b) => (xs[a] as number) - (xs[b] as number));
    out.push({
      name,
      labels,
      data: [order.map((i) => xs[i] as number), order.map((i) => (rows[i] as { metric: number }).metric)],
    });
  }
  return out;
}

/** Full metric data as CSV: one row per report, one column per metric. */
export function toCsv(reports: readonly MetricReport[]): string {
  const names = metricNames(reports);
  const quote = (s: string) => (/[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
  const lines = [["group", "steps_completed", "timestamp", ...names].map(quote).join(",")];
  for (const r of reports) {
    const cells = [r.group, String(r.stepsCompleted), String(r.timestamp)];
    for (const n of names) {
      const v = r.metrics[n];
      cells.push(v === undefined ? "" : typeof v === "string" ? v : JSON.stringify(v));
    }
    lines.push(cells.map(quote).join(","));
  }
  return `${lines.join("\n")}\n`;
}
