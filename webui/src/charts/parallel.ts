// Parallel coordinates and a two-objective scatter, drawn as SVG: one axis per
// hyperparameter that varies and one for the searcher metric, one polyline per trial.
// uPlot draws series over one x scale, which neither view has, so these are plain SVG.

import { metric } from "../ui/format";
import { color } from "./chart";
import type { JsonObject } from "../api/types";
import { flattenHparams } from "./shape";

const SVG = "http://www.w3.org/2000/svg";

export interface Row {
  key: string;
  hparams: JsonObject;
  metric: number;
  /** A warm start's trial: drawn dashed, and not counted as one of the search's own. */
  imported: boolean;
}

export interface Axis {
  name: string;
  /** Categorical values in axis order (bottom to top), or null for a numeric axis. */
  labels: string[] | null;
  log: boolean;
  min: number;
  max: number;
  /** Each row's position on the axis, 0 (bottom) to 1 (top); null when it has no value. */
  at: (number | null)[];
}

/** The axes: every hyperparameter whose value differs between rows (all of them when none
 * differs), then the metric. `logNames` are drawn on a log10 scale. */
export function parallelAxes(rows: readonly Row[], metricName: string, logNames: ReadonlySet<string>): Axis[] {
  const flat = rows.map((r) => flattenHparams(r.hparams));
  const names = [...new Set(flat.flatMap((f) => Object.keys(f)))].sort();
  const varying = names.filter((n) => new Set(flat.map((f) => JSON.stringify(f[n] ?? null))).size > 1);
  const axes = (varying.length ? varying : names).map((n) => axis(n, flat.map((f) => f[n] ?? null), logNames.has(n)));
  axes.push(axis(metricName, rows.map((r) => r.metric), false));
  return axes;
}

function axis(name: string, values: unknown[], log: boolean): Axis {
  if (values.every((v) => typeof v === "number" && Number.isFinite(v))) {
    const nums = (values as number[]).map((v) => (log && v > 0 ? Math.log10(v) : v));
    const min = Math.min(...nums);
    const max = Math.max(...nums);
    const span = max - min;
    return { name, labels: null, log, min, max, at: nums.map((v) => (span > 0 ? (v - min) / span : 0.5)) };
  }
  const keys = [...new Set(values.map((v) => JSON.stringify(v)))].sort();
  const labels = keys.map((k) => {
    const parsed: unknown = JSON.parse(k);
    return typeof parsed === "string" ? parsed : k;
  });
  const step = keys.length > 1 ? 1 / (keys.length - 1) : 0;
  const at = values.map((v) => (keys.length > 1 ? keys.indexOf(JSON.stringify(v)) * step : 0.5));
  return { name, labels, log: false, min: 0, max: keys.length - 1, at };
}

function el<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function tickText(a: Axis, fraction: number): string {
  const v = a.min + (a.max - a.min) * fraction;
  return metric(a.log ? 10 ** v : v);
}

/** The parallel-coordinates SVG; lines are coloured from best (blue) to worst (orange). */
export function parallelSvg(rows: readonly Row[], axes: readonly Axis[], smallerIsBetter: boolean): SVGSVGElement {
  const gap = 150;
  const pad = { left: 90, right: 70, top: 36, bottom: 30 };
  const width = pad.left + pad.right + gap * Math.max(1, axes.length - 1);
  const height = 300;
  const plotH = height - pad.top - pad.bottom;
  const svg = el("svg", { class: "parallel", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  const x = (i: number) => pad.left + gap * i;
  const y = (f: number) => pad.top + plotH * (1 - f);
  const metricAxis = axes[axes.length - 1] as Axis;
  rows.forEach((row, r) => {
    const points = axes
      .map((a, i) => (a.at[r] === null ? null : `${x(i)},${y(a.at[r] as number)}`))
      .filter((p): p is string => p !== null);
    const goodness = smallerIsBetter ? 1 - (metricAxis.at[r] ?? 0.5) : (metricAxis.at[r] ?? 0.5);
    const hue = Math.round(25 + 195 * goodness);
    const line = el("polyline", {
      class: row.imported ? "pc-line imported" : "pc-line",
      points: points.join(" "),
      fill: "none",
      stroke: `hsl(${hue} 70% 45%)`,
      "stroke-width": 1.5,
      "stroke-opacity": 0.8,
      "data-key": row.key,
      ...(row.imported ? { "stroke-dasharray": "4 3" } : {}),
    });
    line.appendChild(el("title", {}, `${row.key}: ${metric(row.metric)}`));
    svg.appendChild(line);
  });
  axes.forEach((a, i) => {
    const g = el("g", { class: "pc-axis", "data-axis": a.name });
    g.appendChild(el("line", { x1: x(i), x2: x(i), y1: y(0), y2: y(1), stroke: "#555" }));
    g.appendChild(el("text", { x: x(i), y: pad.top - 14, "text-anchor": "middle", class: "pc-name" }, a.name));
    const ticks: [number, string][] = a.labels
      ? a.labels.map((l, k) => [a.labels && a.labels.length > 1 ? k / (a.labels.length - 1) : 0.5, l])
      : [0, 0.5, 1].map((f) => [f, tickText(a, f)]);
    for (const [f, label] of ticks) {
      g.appendChild(el("line", { x1: x(i) - 4, x2: x(i), y1: y(f), y2: y(f), stroke: "#555" }));
      g.appendChild(el("text", { x: x(i) - 6, y: y(f) + 4, "text-anchor": "end", class: "pc-tick" }, label));
    }
    svg.appendChild(g);
  });
  return svg;
}

export interface ScatterPoint {
  key: string;
  x: number;
  y: number;
  front: boolean;
}

/** Two objectives against each other; the front's points are filled and joined. */
export function paretoSvg(points: readonly ScatterPoint[], xName: string, yName: string): SVGSVGElement {
  const width = 520;
  const height = 320;
  const pad = { left: 90, right: 30, top: 16, bottom: 44 };
  const svg = el("svg", { class: "pareto", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  const xs = points.map((p) => p.x);
  const ys = points.map((p) => p.y);
  const scale = (vals: number[], lo: number, hi: number) => {
    const min = Math.min(...vals);
    const max = Math.max(...vals);
    const span = max - min || 1;
    return { at: (v: number) => lo + ((v - min) / span) * (hi - lo), min, max };
  };
  const sx = scale(xs, pad.left, width - pad.right);
  const sy = scale(ys, height - pad.bottom, pad.top);
  svg.appendChild(el("line", { x1: pad.left, x2: width - pad.right, y1: height - pad.bottom, y2: height - pad.bottom, stroke: "#555" }));
  svg.appendChild(el("line", { x1: pad.left, x2: pad.left, y1: pad.top, y2: height - pad.bottom, stroke: "#555" }));
  svg.appendChild(el("text", { x: (pad.left + width - pad.right) / 2, y: height - 8, "text-anchor": "middle" }, xName));
  svg.appendChild(el("text", { x: 14, y: (pad.top + height - pad.bottom) / 2, "text-anchor": "middle", transform: `rotate(-90 14 ${(pad.top + height - pad.bottom) / 2})` }, yName));
  for (const [v, anchor] of [[sx.min, "start"], [sx.max, "end"]] as const) {
    svg.appendChild(el("text", { x: sx.at(v), y: height - pad.bottom + 16, "text-anchor": anchor, class: "pc-tick" }, metric(v)));
  }
  for (const v of [sy.min, sy.max]) {
    svg.appendChild(el("text", { x: pad.left - 6, y: sy.at(v) + 4, "text-anchor": "end", class: "pc-tick" }, metric(v)));
  }
  const front = points.filter((p) => p.front).sort((a, b) => a.x - b.x);
  if (front.length > 1) {
    svg.appendChild(el("polyline", { points: front.map((p) => `${sx.at(p.x)},${sy.at(p.y)}`).join(" "), fill: "none", stroke: color(1), "stroke-width": 1.5, class: "front-line" }));
  }
  for (const p of points) {
    const dot = el("circle", {
      cx: sx.at(p.x),
      cy: sy.at(p.y),
      r: p.front ? 6 : 4,
      fill: p.front ? color(1) : "none",
      stroke: p.front ? color(1) : color(0),
      class: p.front ? "pareto-point front" : "pareto-point",
      "data-key": p.key,
    });
    dot.appendChild(el("title", {}, `${p.key}: ${xName} ${metric(p.x)}, ${yName} ${metric(p.y)}`));
    svg.appendChild(dot);
  }
  return svg;
}
