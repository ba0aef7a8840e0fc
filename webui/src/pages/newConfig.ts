// Configs for "create from existing": a fork keeps the parent's config (renamed), a
// continuation trains one trial further from its latest checkpoint. Pure; unit-tested.

import type { Experiment, JsonObject, Trial } from "../api/types";
import { fromYaml, toYaml, withTopLevel } from "../ui/yaml";

export function forkConfig(original: string, experiment: Pick<Experiment, "id" | "name">): string {
  return withTopLevel(original, { name: `Fork of ${experiment.name || `experiment ${experiment.id}`}` });
}

/** Hyperparameter values as constants (nested groups stay groups). */
export function constHparams(hparams: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(hparams)) {
    out[k] =
      typeof v === "object" && v !== null && !Array.isArray(v) ? constHparams(v as JsonObject) : { type: "const", val: v };
  }
  return out;
}

/**
 * A single-trial experiment that starts from `trial`'s latest checkpoint
 * (`searcher.source_trial_id`), with the trial's hyperparameters fixed.
 */
export function continueConfig(original: string, filled: JsonObject, trial: Pick<Trial, "id" | "hparams">, name: string): string {
  let cfg: JsonObject;
  try {
    const parsed = fromYaml(original);
    cfg = typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as JsonObject) : { ...filled };
  } catch {
    cfg = { ...filled };
  }
  const searcher = (typeof cfg.searcher === "object" && cfg.searcher !== null ? cfg.searcher : filled.searcher ?? {}) as JsonObject;
  const next: JsonObject = { name: "single", metric: searcher.metric };
  if (searcher.smaller_is_better !== undefined) next.smaller_is_better = searcher.smaller_is_better;
  const length = searcher.max_length ?? (filled.searcher as JsonObject | undefined)?.max_length;
  if (length !== undefined && length !== null) next.max_length = length;
  next.source_trial_id = trial.id;
  return toYaml({
    ...cfg,
    name: `${name} (continued from trial ${trial.id})`,
    hyperparameters: constHparams(trial.hparams),
    searcher: next,
  });
}
