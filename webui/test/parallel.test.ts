import { describe, expect, it } from "vitest";
import { parallelAxes, type Row } from "../src/charts/parallel";

const row = (key: string, hparams: Record<string, unknown>, metric: number, imported = false): Row => ({ key, hparams, metric, imported });

describe("parallel coordinates axes", () => {
  it("has an axis per varying hyperparameter, categorical ones by value, and the metric last", () => {
    const rows = [
      row("a", { lr: 0.01, opt: { name: "sgd" }, steps: 10 }, 2),
      row("b", { lr: 0.1, opt: { name: "adam" }, steps: 10 }, 1),
      row("c", { lr: 1, opt: { name: "sgd" }, steps: 10 }, 0, true),
    ];
    const axes = parallelAxes(rows, "loss", new Set(["lr"]));
    expect(axes.map((a) => a.name)).toEqual(["lr", "opt.name", "loss"]);
    const [lr, opt, loss] = axes;
    // Log scale: 0.01, 0.1, 1 are evenly spaced.
    expect(lr?.at).toEqual([0, 0.5, 1]);
    expect(opt?.labels).toEqual(["adam", "sgd"]);
    expect(opt?.at).toEqual([1, 0, 1]);
    expect(loss?.at).toEqual([1, 0.5, 0]);
  });

  it("keeps every hyperparameter when none varies, so each line still crosses an axis", () => {
    const axes = parallelAxes([row("a", { x: 1 }, 3), row("b", { x: 1 }, 3)], "m", new Set());
    expect(axes.map((a) => a.name)).toEqual(["x", "m"]);
    expect(axes[0]?.at).toEqual([0.5, 0.5]);
  });
});
