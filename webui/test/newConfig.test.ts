import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { constHparams, continueConfig, forkConfig } from "../src/pages/newConfig";

const ORIGINAL = `# my experiment
name: mnist
entrypoint: python3 train.py
hyperparameters:
  lr: {type: double, minval: 0.01, maxval: 0.1}
  opt:
    name: {type: categorical, vals: [sgd, adam]}
searcher:
  name: adaptive_asha
  metric: val_loss
  smaller_is_better: true
  max_trials: 16
  max_length: {batches: 1000}
`;

describe("create from existing", () => {
  it("forks with a new name and keeps the user's comments", () => {
    const text = forkConfig(ORIGINAL, { id: 3, name: "mnist" });
    expect(text).toContain("# my experiment");
    expect(parse(text).name).toBe("Fork of mnist");
    expect(parse(text).searcher.max_trials).toBe(16);
  });

  it("continues a trial: one trial, its hyperparameters fixed, from its checkpoint", () => {
    const cfg = parse(continueConfig(ORIGINAL, {}, { id: 7, hparams: { lr: 0.05, opt: { name: "adam" } } }, "mnist"));
    expect(cfg.searcher).toEqual({ name: "single", metric: "val_loss", smaller_is_better: true, max_length: { batches: 1000 }, source_trial_id: 7 });
    expect(cfg.hyperparameters).toEqual({ lr: { type: "const", val: 0.05 }, opt: { name: { type: "const", val: "adam" } } });
    expect(cfg.entrypoint).toBe("python3 train.py");
    expect(cfg.name).toBe("mnist (continued from trial 7)");
  });

  it("turns list values into constants, not groups", () => {
    expect(constHparams({ sizes: [1, 2] })).toEqual({ sizes: { type: "const", val: [1, 2] } });
  });
});
