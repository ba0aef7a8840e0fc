import { describe, expect, it } from "vitest";
import type { MetricReport } from "../src/api/types";
import { align, downsample, flattenHparams, hparamScatter, log10, metricNames, metricSeries, toCsv } from "../src/charts/shape";

const report = (steps: number, metrics: Record<string, unknown>, group = "training"): MetricReport => ({
  group,
  stepsCompleted: steps,
  metrics,
  timestamp: steps,
});

describe("metric series", () => {
  it("lists the numeric metrics only", () => {
    expect(metricNames([report(1, { loss: 1, note: "x" }), report(2, { acc: 0.5, loss: Number.NaN })])).toEqual(["acc", "loss"]);
  });

  it("extracts one metric over steps, skipping reports without it", () => {
    const s = metricSeries([report(1, { loss: 3 }), report(2, { acc: 1 }), report(3, { loss: 1 })], "loss");
    expect(s).toEqual({ x: [1, 3], y: [3, 1] });
  });

  it("sorts by step when reports arrive out of order", () => {
    const s = metricSeries([report(5, { loss: 5 }), report(1, { loss: 1 }), report(3, { loss: 3 })], "loss");
    expect(s).toEqual({ x: [1, 3, 5], y: [1, 3, 5] });
  });
});

describe("downsample", () => {
  const big = (n: number) => ({ x: Array.from({ length: n }, (_, i) => i), y: Array.from({ length: n }, (_, i) => Math.sin(i / 10)) });

  it("leaves small series alone", () => {
    const s = big(100);
    expect(downsample(s, 2000)).toBe(s);
  });

  it("keeps 100,000 points within the budget, in step order, with the ends", () => {
    const s = big(100_000);
    const d = downsample(s, 2000);
    expect(d.x.length).toBeLessThanOrEqual(2000);
    expect(d.x.length).toBeGreaterThan(1000);
    expect(d.x[0]).toBe(0);
    expect(d.x[d.x.length - 1]).toBe(99_999);
    for (let i = 1; i < d.x.length; i++) expect(d.x[i] as number).toBeGreaterThan(d.x[i - 1] as number);
  });

  it("keeps spikes (each bucket's min and max)", () => {
    const s = { x: Array.from({ length: 10_000 }, (_, i) => i), y: Array.from({ length: 10_000 }, () => 1) };
    s.y[4321] = 100;
    s.y[8765] = -50;
    const d = downsample(s, 200);
    expect(Math.max(...(d.y as number[]))).toBe(100);
    expect(Math.min(...(d.y as number[]))).toBe(-50);
  });
});

describe("align and log scale", () => {
  it("puts series on the union of their steps with gaps as null", () => {
    expect(align([{ x: [1, 3], y: [10, 30] }, { x: [2, 3], y: [20, 31] }])).toEqual([
      [1, 2, 3],
      [10, null, 30],
      [null, 20, 31],
    ]);
  });

  it("drops values a log scale cannot show", () => {
    expect(log10([100, 0, -1, null, 0.1])).toEqual([2, null, null, null, -1]);
  });
});

describe("hyperparameters", () => {
  it("flattens nested groups to dotted names", () => {
    expect(flattenHparams({ lr: 0.1, opt: { name: "sgd", m: { beta: 0.9 } } })).toEqual({ lr: 0.1, "opt.name": "sgd", "opt.m.beta": 0.9 });
  });

  it("scatters the metric against each varying hyperparameter", () => {
    const points = hparamScatter([
      { hparams: { lr: 0.3, opt: "adam", steps: 5 }, metric: 0.2 },
      { hparams: { lr: 0.1, opt: "sgd", steps: 5 }, metric: 0.4 },
      { hparams: { lr: 0.2, opt: "adam", steps: 5 }, metric: null },
    ]);
    expect(points.map((p) => p.name)).toEqual(["lr", "opt"]);
    const lr = points[0];
    expect(lr?.labels).toBeNull();
    expect(lr?.data).toEqual([
      [0.1, 0.3],
      [0.4, 0.2],
    ]);
    const opt = points[1];
    expect(opt?.labels).toEqual(["adam", "sgd"]);
    expect(opt?.data).toEqual([
      [0, 1],
      [0.2, 0.4],
    ]);
  });
});

describe("csv export", () => {
  it("writes every report with a column per metric", () => {
    const csv = toCsv([report(1, { loss: 1 }), report(5, { acc: 0.5, note: "a,b" }, "validation")]);
    expect(csv).toBe("group,steps_completed,timestamp,acc,loss\ntraining,1,1,,1\nvalidation,5,5,0.5,\n");
  });
});
