// A uPlot chart made once per place on a page; later data goes through `setData`.
// A log y scale is drawn by plotting log10 of the values with powers of ten on the axis,
// so switching it needs no new chart either.

import uPlot from "uplot";
import { metric } from "../ui/format";
import { type Aligned, log10 } from "./shape";

const PALETTE = ["#2f6fde", "#e4572e", "#17a398", "#f3a712", "#8f3985", "#4c956c", "#d7263d", "#1b998b", "#7d5ba6", "#c17817"];

export function color(i: number): string {
  return PALETTE[i % PALETTE.length] as string;
}

export interface ChartOptions {
  xLabel: string;
  yLabel?: string;
  height?: number;
  /** Points only, no lines (the hyperparameter view). */
  scatter?: boolean;
  /** Names for integer x values (a categorical hyperparameter). */
  xNames?: string[] | null;
}

export class Chart {
  readonly el: HTMLDivElement;
  private plot: uPlot;
  private labels: string[] = [];
  private raw: Aligned = [[]];
  private log = false;
  private readonly resize: ResizeObserver | null;

  constructor(private readonly opts: ChartOptions) {
    this.el = document.createElement("div");
    this.el.className = "chart";
    const xNames = opts.xNames;
    const yValues = (_u: uPlot, splits: number[]) => splits.map((v) => metric(this.log ? 10 ** v : v));
    this.plot = new uPlot(
      {
        width: 600,
        height: opts.height ?? 280,
        scales: { x: { time: false } },
        legend: { live: true },
        cursor: { drag: { x: true, y: false } },
        series: [{ label: opts.xLabel, value: (_u, v) => (v === null ? "–" : xNames ? (xNames[v] ?? String(v)) : String(v)) }],
        axes: [
          {
            label: opts.xLabel,
            ...(xNames ? { splits: () => xNames.map((_, i) => i), values: () => xNames } : {}),
          },
          { label: opts.yLabel ?? "", values: yValues, splits: (u, _i, min, max, incr) => this.ySplits(min, max, incr), size: 60 },
        ],
      },
      [[]],
      this.el,
    );
    this.resize =
      typeof ResizeObserver === "undefined"
        ? null
        : new ResizeObserver(() => {
            const width = Math.max(200, Math.floor(this.el.clientWidth));
            if (width !== this.plot.width) this.plot.setSize({ width, height: this.plot.height });
          });
    this.resize?.observe(this.el);
  }

  /** Series labels and their aligned data; series are added or removed to match. */
  setData(labels: string[], data: Aligned): void {
    if (labels.join("\u0000") !== this.labels.join("\u0000")) {
      for (let i = this.labels.length; i >= 1; i--) this.plot.delSeries(i);
      labels.forEach((label, i) => this.plot.addSeries(this.seriesOptions(label, i), i + 1));
      this.labels = labels.slice();
    }
    this.raw = data;
    this.draw();
  }

  setLog(log: boolean): void {
    if (log === this.log) return;
    this.log = log;
    this.draw();
  }

  /** How many points the chart holds (for tests and the page's own sanity). */
  get points(): number {
    return this.raw[0].length;
  }

  destroy(): void {
    this.resize?.disconnect();
    this.plot.destroy();
  }

  /** Tick positions: whole powers of ten on a log scale when the range spans two or more. */
  private ySplits(min: number, max: number, incr: number): number[] {
    if (this.log) {
      const decades: number[] = [];
      for (let k = Math.ceil(min); k <= Math.floor(max); k++) decades.push(k);
      if (decades.length >= 2) return decades;
    }
    const out: number[] = [];
    if (!(incr > 0) || !Number.isFinite(min) || !Number.isFinite(max)) return out;
    for (let v = Math.ceil(min / incr) * incr; v <= max + incr * 1e-9; v += incr) out.push(Number(v.toPrecision(12)));
    return out;
  }

  private draw(): void {
    const [x, ...ys] = this.raw;
    const data = [x, ...ys.map((y) => (this.log ? log10(y) : y))] as uPlot.AlignedData;
    this.plot.setData(data, true);
    this.el.dataset.points = String(x.length);
  }

  private seriesOptions(label: string, i: number): uPlot.Series {
    const stroke = color(i);
    const value = (_u: uPlot, v: number | null) => (v === null ? "–" : metric(this.log ? 10 ** v : v));
    if (this.opts.scatter) {
      return { label, stroke, value, paths: () => null, points: { show: true, size: 8, fill: stroke } };
    }
    return { label, stroke, value, width: 1.5, spanGaps: true };
  }
}
